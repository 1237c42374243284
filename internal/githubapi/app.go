package githubapi

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// The App's own endpoints. A GitHub App has one webhook, with no id: its
// configuration is at /app/hook/config and its deliveries at
// /app/hook/deliveries; every call is authenticated with the App's JSON
// Web Token (App), not a user's token.

// The App is the Owner of a GitHub App's webhook.
var TheApp = Owner{App: true}

// App signs the JSON Web Tokens that authenticate as a GitHub App, with
// github.com/golang-jwt/jwt/v5: RS256 with the App's private key, iss the
// App's ID (or its client ID, which GitHub also takes), iat 60 seconds in
// the past (GitHub's advice, for a clock a little ahead), exp 9 minutes
// from now (GitHub refuses more than 10; the minute spare is for a clock
// ahead of GitHub's). A token is reused until a minute before it expires.
//
// When GitHub refuses a token's times (a clock further off than that), the
// Client learns the difference from the answer's Date header, signs again
// on GitHub's time, and says how far off the clock is (as octokit's
// auth-app does).
type App struct {
	ID  string // the App's ID or client ID
	Key *rsa.PrivateKey

	now func() time.Time // tests

	mu     sync.Mutex
	skew   time.Duration // GitHub's clock minus ours, once known
	token  string
	expiry time.Time // ours
}

// ParseKey reads a GitHub App's private key: the PEM file GitHub gives
// ("-----BEGIN RSA PRIVATE KEY-----", PKCS #1) or a PKCS #8 one.
func ParseKey(pem []byte) (*rsa.PrivateKey, error) {
	key, err := jwt.ParseRSAPrivateKeyFromPEM(pem)
	if err != nil {
		return nil, fmt.Errorf("not a GitHub App private key (want the .pem file from the App's settings, Private keys): %w", err)
	}
	return key, nil
}

func (a *App) clock() time.Time {
	if a.now != nil {
		return a.now()
	}
	return time.Now()
}

// JWT returns a token to authenticate as the App, signed now or earlier.
func (a *App) JWT() (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clock()
	if a.token != "" && now.Before(a.expiry.Add(-time.Minute)) {
		return a.token, nil
	}
	github := now.Add(a.skew)
	claims := jwt.RegisteredClaims{
		Issuer:    a.ID,
		IssuedAt:  jwt.NewNumericDate(github.Add(-60 * time.Second)),
		ExpiresAt: jwt.NewNumericDate(github.Add(9 * time.Minute)),
	}
	token, err := jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(a.Key)
	if err != nil {
		return "", fmt.Errorf("signing the App's token: %w", err)
	}
	a.token, a.expiry = token, now.Add(9*time.Minute)
	return token, nil
}

// adjust sets GitHub's clock from an answer's Date header and drops the
// token, so that the next one is signed on GitHub's time. It returns the
// difference (GitHub's clock minus ours), and false when date says nothing.
func (a *App) adjust(date string, sent time.Time) (time.Duration, bool) {
	t, err := http.ParseTime(date)
	if err != nil {
		return 0, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	// Date has whole seconds: a difference under two is not the cause.
	skew := t.Sub(sent).Round(time.Second)
	if skew > -2*time.Second && skew < 2*time.Second {
		return skew, false
	}
	a.skew, a.token = skew, ""
	return skew, true
}

// timeClaimRefused reports whether GitHub's message refuses a token's iat
// or exp: "'Expiration time' claim ('exp') is too far in the future", "…
// must be a numeric value representing the future time…", "'Issued at'
// claim ('iat') must be an Integer representing the time that the
// assertion was issued".
func timeClaimRefused(msg string) bool {
	return strings.Contains(msg, "('exp')") || strings.Contains(msg, "('iat')")
}

// describeSkew says how far off this machine's clock is, in words: to 10
// seconds beyond a minute (a Date header has whole seconds, and the
// answer takes time to come).
func describeSkew(skew time.Duration) string {
	if skew >= time.Minute || skew <= -time.Minute {
		skew = skew.Round(10 * time.Second)
	}
	if skew < 0 {
		return fmt.Sprintf("this machine's clock is about %s ahead of GitHub's", (-skew).String())
	}
	return fmt.Sprintf("this machine's clock is about %s behind GitHub's", skew.String())
}

// appHint is what to do about GitHub's refusal of an App's request.
func appHint(status int, msg, appID string) string {
	lower := strings.ToLower(msg)
	switch {
	case timeClaimRefused(msg):
		return "GitHub refused the App token's times: set this machine's clock (timedatectl set-ntp true, or your system's date settings)"
	case strings.Contains(lower, "could not be decoded") || strings.Contains(lower, "signature"):
		return fmt.Sprintf("the key is not one of App %s's keys: generate a private key in the App's settings (Private keys) and give its .pem with --app-key", appID)
	case strings.Contains(lower, "integration not found"):
		return fmt.Sprintf("GitHub knows no App with ID %s: take the App ID from the App's settings (General, About)", appID)
	case strings.Contains(lower, "suspended"):
		return "the App is suspended: unsuspend it in its settings (Advanced), or ask the account that owns it"
	case strings.Contains(lower, "not accessible by integration") || status == http.StatusForbidden:
		return "the App lacks the permission for this: add it in the App's settings (Permissions & events), then accept it in each installation"
	case status == http.StatusUnauthorized:
		return fmt.Sprintf("check --app-id %s and --app-key (the App's ID and one of its private keys)", appID)
	}
	return ""
}

// AppHookConfig returns the App's webhook configuration. GitHub never
// returns the secret: HookConfig.Secret is "********" when one is set.
func (c *Client) AppHookConfig(ctx context.Context) (HookConfig, error) {
	var cfg HookConfig
	_, err := c.do(ctx, TheApp, http.MethodGet, "/app/hook/config", nil, nil, &cfg)
	return cfg, err
}

// UpdateAppHookConfig changes the App's webhook configuration: the fields
// of cfg that are set (an empty Secret leaves the secret as it is).
func (c *Client) UpdateAppHookConfig(ctx context.Context, cfg HookConfig) (HookConfig, error) {
	var out HookConfig
	_, err := c.do(ctx, TheApp, http.MethodPatch, "/app/hook/config", nil, cfg, &out)
	return out, err
}

// AppInfo is a GitHub App, as the API describes it.
type AppInfo struct {
	ID      int64  `json:"id"`
	Slug    string `json:"slug"`
	Name    string `json:"name"`
	HTMLURL string `json:"html_url"`
	Owner   struct {
		Login string `json:"login"`
	} `json:"owner"`
	Events []string `json:"events"`
}

// AppCredentials are what GitHub gives once for an App made from a
// manifest: its identity, its first private key and its secrets.
type AppCredentials struct {
	AppInfo
	ClientID      string  `json:"client_id"`
	ClientSecret  string  `json:"client_secret"`
	WebhookSecret *string `json:"webhook_secret"`
	PEM           string  `json:"pem"`
}

// ErrCodeUsed is the answer to a manifest code that is unknown, used or
// older than an hour.
var ErrCodeUsed = errors.New("GitHub no longer knows the manifest's code")

// CreateAppFromManifest exchanges the code GitHub gave the manifest flow's
// redirect for the new App's credentials (POST
// /app-manifests/{code}/conversions; no token needed). The code is good
// once, for an hour.
func (c *Client) CreateAppFromManifest(ctx context.Context, code string) (AppCredentials, error) {
	var out AppCredentials
	_, err := c.do(ctx, Owner{}, http.MethodPost, "/app-manifests/"+url.PathEscape(code)+"/conversions", nil, nil, &out)
	if e := (*Error)(nil); errors.As(err, &e) && e.Status == http.StatusNotFound {
		e.err, e.Hint = ErrCodeUsed, "the code is good once, for an hour: run hookline app new again"
	}
	return out, err
}
