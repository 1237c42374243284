package githubtest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The server is also one GitHub App: AppID, whose private key is KeyPEM.
// Its requests (/app, /app/hook/...) must carry a JSON Web Token signed
// with that key, checked here with the standard library (RS256, iss, iat
// and exp against GitHub's clock, which SetClockSkew can move), and
// refused with GitHub's own messages. Its webhook is the hook AppHookID.
const (
	AppID      = "4242"
	AppHookID  = 1                                  // Deliver to it as to any hook
	AppHookURL = "https://app.example.com/webhooks" // the App's webhook URL at the start
)

var (
	keyOnce sync.Once
	appKey  *rsa.PrivateKey
)

// key is the App's private key, made once per test binary.
func key() *rsa.PrivateKey {
	keyOnce.Do(func() {
		var err error
		if appKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	})
	return appKey
}

// KeyPEM is the App's private key as GitHub gives it (PKCS #1 PEM).
func KeyPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key())})
}

// SetClockSkew moves GitHub's clock by d from this machine's: the Date
// header and the token checks use it.
func (s *Server) SetClockSkew(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skew = d
}

func (s *Server) now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Add(s.skew)
}

// AppHook returns the App's webhook.
func (s *Server) AppHook() Hook {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.hooks[AppHookID]
}

// SetAppHookURL sets the App's webhook URL, as the App's settings page
// does.
func (s *Server) SetAppHookURL(u string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks[AppHookID].URL = u
}

// checkJWT returns GitHub's refusal of authorization as an App's token, or
// "" when it is one: RS256, signed with the App's key, iss the App's ID,
// iat not in GitHub's future, exp in its future and at most 10 minutes
// away (GitHub's "Generating a JSON Web Token (JWT) for a GitHub App").
func (s *Server) checkJWT(authorization string) string {
	const undecodable = "A JSON web token could not be decoded"
	token, ok := strings.CutPrefix(authorization, "Bearer ")
	parts := strings.Split(token, ".")
	if !ok || len(parts) != 3 {
		return undecodable
	}
	var head struct{ Alg, Typ string }
	var claims struct {
		Iss any   `json:"iss"`
		Iat int64 `json:"iat"`
		Exp int64 `json:"exp"`
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || decodePart(parts[0], &head) != nil || decodePart(parts[1], &claims) != nil || head.Alg != "RS256" {
		return undecodable
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(&key().PublicKey, crypto.SHA256, digest[:], sig) != nil {
		return undecodable
	}
	if fmt.Sprint(claims.Iss) != AppID {
		return "Integration not found"
	}
	now := s.now().Unix()
	switch {
	case claims.Iat == 0 || claims.Iat > now:
		return "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"
	case claims.Exp <= now:
		return "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"
	case claims.Exp > now+600:
		return "'Expiration time' claim ('exp') is too far in the future"
	}
	return ""
}

func decodePart(part string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func targetType(owner string) string {
	switch {
	case owner == "/app":
		return "integration"
	case strings.HasPrefix(owner, "/orgs/"):
		return "organization"
	}
	return "repository"
}

// manifestApp is an App made from a manifest posted to the web form.
type manifestApp struct {
	Name, HookURL, Redirect string
	Events                  []string
	Permissions             map[string]string
	Org                     string // "" for the user's account
	WebhookSecret           string
}

// Manifest returns the App made by the manifest flow once its code was
// converted, or false.
func (s *Server) Manifest() (name, hookURL string, events []string, permissions map[string]string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.app == nil {
		return "", "", nil, nil, false
	}
	return s.app.Name, s.app.HookURL, s.app.Events, s.app.Permissions, true
}

// manifestKeys are the keys GitHub's manifest takes ("Registering a GitHub
// App from a manifest", GitHub App manifest parameters).
var manifestKeys = []string{"name", "url", "hook_attributes", "redirect_url", "callback_urls", "setup_url", "description", "public",
	"default_events", "default_permissions", "request_oauth_on_install", "setup_on_update"}

// newAppForm is GitHub's web page that takes a manifest (POST
// /settings/apps/new, or /organizations/ORG/settings/apps/new, with the
// form field manifest and the query's state). Where GitHub shows the
// manifest for the user to confirm, it goes straight on: it redirects to
// the manifest's redirect_url with a code and the state.
func (s *Server) newAppForm(w http.ResponseWriter, r *http.Request) {
	refuse := func(format string, args ...any) {
		s.t.Errorf("githubtest: the manifest form: "+format, args...)
		http.Error(w, fmt.Sprintf(format, args...), http.StatusUnprocessableEntity)
	}
	if r.Method != http.MethodPost {
		refuse("%s, want POST", r.Method)
		return
	}
	org := ""
	if rest, ok := strings.CutPrefix(r.URL.Path, "/organizations/"); ok {
		org, _, _ = strings.Cut(rest, "/")
	} else if r.URL.Path != "/settings/apps/new" {
		refuse("path %s, want /settings/apps/new or /organizations/ORG/settings/apps/new", r.URL.Path)
		return
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.PostFormValue("manifest")), &m); err != nil {
		refuse("the manifest field is not a JSON object: %v", err)
		return
	}
	for k := range m {
		if !slices.Contains(manifestKeys, k) {
			refuse("the manifest has key %q, which GitHub does not take", k)
			return
		}
	}
	var man struct {
		Name, URL string
		Redirect  string `json:"redirect_url"`
		Hook      *struct {
			URL    string
			Active *bool
		} `json:"hook_attributes"`
		Events      []string          `json:"default_events"`
		Permissions map[string]string `json:"default_permissions"`
		Public      *bool             `json:"public"`
	}
	if err := json.Unmarshal([]byte(r.PostFormValue("manifest")), &man); err != nil {
		refuse("the manifest: %v", err)
		return
	}
	switch {
	case man.URL == "":
		refuse("the manifest has no url (the App's homepage, required)")
		return
	case man.Hook == nil || man.Hook.URL == "":
		refuse("the manifest has no hook_attributes.url")
		return
	case man.Redirect == "":
		refuse("the manifest has no redirect_url")
		return
	}
	for p, level := range man.Permissions {
		if level != "read" && level != "write" {
			refuse("permission %s: %q, want read or write", p, level)
			return
		}
	}
	code := strings.ToLower(rand.Text())
	s.mu.Lock()
	s.manifests[code] = &manifestApp{Name: man.Name, HookURL: man.Hook.URL, Redirect: man.Redirect, Events: man.Events, Permissions: man.Permissions, Org: org, WebhookSecret: rand.Text()}
	s.mu.Unlock()
	u, err := url.Parse(man.Redirect)
	if err != nil {
		refuse("redirect_url %q: %v", man.Redirect, err)
		return
	}
	q := u.Query()
	q.Set("code", code)
	q.Set("state", r.URL.Query().Get("state"))
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

// operateApp does the App's operations (see operate).
func (s *Server) operateApp(op string, params map[string]string, body []byte) (int, func(any) any, map[string]string) {
	h := s.hooks[AppHookID]
	switch op {
	case "get-authenticated":
		name := "Octocat App"
		if s.app != nil {
			name = s.app.Name
		}
		return http.StatusOK, func(ex any) any {
			m := clone(ex).(map[string]any)
			id, _ := strconv.Atoi(AppID)
			m["id"], m["name"] = id, name
			return m
		}, nil
	case "get-webhook-config-for-app", "update-webhook-config-for-app":
		if op == "update-webhook-config-for-app" {
			var in struct{ URL, Secret *string }
			_ = json.Unmarshal(body, &in)
			if in.URL != nil {
				h.URL = *in.URL
			}
			if in.Secret != nil {
				h.Secret = *in.Secret
			}
		}
		hook := *h
		return http.StatusOK, func(ex any) any {
			m := clone(ex).(map[string]any)
			m["url"] = hook.URL
			delete(m, "secret")
			if hook.Secret != "" {
				m["secret"] = "********"
			}
			return m
		}, nil
	case "create-from-manifest":
		m := s.manifests[params["code"]]
		if m == nil {
			return http.StatusNotFound, func(any) any {
				return map[string]any{"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}
			}, nil
		}
		delete(s.manifests, params["code"]) // good once
		s.app = m
		h.URL, h.Secret, h.Events = m.HookURL, m.WebhookSecret, m.Events
		return http.StatusCreated, func(ex any) any {
			out := clone(ex).(map[string]any)
			id, _ := strconv.Atoi(AppID)
			slug := strings.ToLower(strings.ReplaceAll(m.Name, " ", "-"))
			out["id"], out["slug"], out["name"] = id, slug, m.Name
			out["html_url"] = "https://github.com/apps/" + slug
			out["events"] = m.Events
			if m.Events == nil {
				out["events"] = []any{}
			}
			perms := map[string]any{}
			for k, v := range m.Permissions {
				perms[k] = v
			}
			out["permissions"] = perms
			out["webhook_secret"] = m.WebhookSecret
			out["pem"] = string(KeyPEM())
			out["client_id"] = "Iv1." + strings.ToLower(rand.Text()[:16])
			out["client_secret"] = strings.ToLower(rand.Text() + rand.Text())[:40]
			return out
		}, nil
	}
	s.t.Errorf("githubtest: operation %s is not served here", op)
	return http.StatusNotImplemented, nil, nil
}
