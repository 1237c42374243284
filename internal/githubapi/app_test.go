package githubapi

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/hookline/hookline/internal/testutil/githubtest"
)

func testApp(t *testing.T) *App {
	t.Helper()
	key, err := ParseKey(githubtest.KeyPEM())
	if err != nil {
		t.Fatal(err)
	}
	return &App{ID: githubtest.AppID, Key: key}
}

// TestAppHook: the App's webhook configuration read and changed, its
// deliveries listed page by page, one fetched and one redelivered, every
// request carrying a token githubtest checks with the App's public key.
func TestAppHook(t *testing.T) {
	gh := githubtest.New(t, "")
	recv := newReceiver(t, http.StatusOK)
	c := &Client{BaseURL: gh.URL, App: testApp(t), PerPage: 2}
	ctx := context.Background()

	cfg, err := c.AppHookConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.URL != githubtest.AppHookURL || cfg.Secret != "********" {
		t.Errorf("AppHookConfig = %+v, want %s with a hidden secret", cfg, githubtest.AppHookURL)
	}
	cfg, err = c.UpdateAppHookConfig(ctx, HookConfig{URL: recv.URL, ContentType: "json", Secret: "new secret"})
	if err != nil {
		t.Fatal(err)
	}
	if h := gh.AppHook(); cfg.URL != recv.URL || h.URL != recv.URL || h.Secret != "new secret" {
		t.Errorf("after UpdateAppHookConfig: answer %+v, server %+v", cfg, h)
	}
	// An empty secret leaves it as it is.
	if _, err := c.UpdateAppHookConfig(ctx, HookConfig{URL: recv.URL}); err != nil || gh.AppHook().Secret != "new secret" {
		t.Errorf("UpdateAppHookConfig without a secret: %v, secret now %q", err, gh.AppHook().Secret)
	}

	var made []int64
	for i := range 3 {
		d, err := gh.Deliver(githubtest.AppHookID, "installation", []byte(`{"action":"created","n":`+string(rune('0'+i))+`}`))
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, d.ID)
	}
	var ids []int64
	if err := c.Deliveries(ctx, TheApp, 0, "", func(d HookDelivery) bool { ids = append(ids, d.ID); return true }); err != nil {
		t.Fatal(err)
	}
	if want := []int64{made[2], made[1], made[0]}; !slices.Equal(ids, want) {
		t.Errorf("App deliveries %v, want %v (two pages)", ids, want)
	}
	d, err := c.Delivery(ctx, TheApp, 0, made[1])
	if err != nil || string(d.Request.Payload) != `{"action":"created","n":1}` || d.Name() != "installation.created" {
		t.Errorf("Delivery: %v, %+v %s", err, d.HookDelivery, d.Request.Payload)
	}
	before := recv.count()
	if err := c.Redeliver(ctx, TheApp, 0, made[1]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the redelivery", func() bool { return recv.count() > before })
	ops := strings.Join(gh.Calls(), ",")
	for _, want := range []string{"apps/get-webhook-config-for-app", "apps/update-webhook-config-for-app", "apps/list-webhook-deliveries", "apps/get-webhook-delivery", "apps/redeliver-webhook-delivery"} {
		if !strings.Contains(ops, want) {
			t.Errorf("operations %s lack %s", ops, want)
		}
	}
}

// TestAppJWT: a token is RS256, iss the App, iat 60 s back, exp 9 minutes
// on; it is reused, and signed again a minute before it expires.
func TestAppJWT(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	a := testApp(t)
	a.now = func() time.Time { return now }
	first, err := a.JWT()
	if err != nil {
		t.Fatal(err)
	}
	var claims jwt.RegisteredClaims
	_, err = jwt.ParseWithClaims(first, &claims, func(*jwt.Token) (any, error) { return &a.Key.PublicKey, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithTimeFunc(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	if claims.Issuer != githubtest.AppID || claims.IssuedAt.Unix() != now.Unix()-60 || claims.ExpiresAt.Unix() != now.Unix()+540 {
		t.Errorf("claims iss %s iat %v exp %v, want %s, now-60 s, now+9 min", claims.Issuer, claims.IssuedAt, claims.ExpiresAt, githubtest.AppID)
	}
	now = now.Add(7 * time.Minute)
	if again, _ := a.JWT(); again != first {
		t.Error("a token 7 minutes old was not reused")
	}
	now = now.Add(90 * time.Second)
	if again, _ := a.JWT(); again == first {
		t.Error("a token 8½ minutes old (30 s left) was reused")
	}
}

// TestAppClockSkew: a clock 5 minutes ahead of GitHub's, or 20 behind, is
// refused with GitHub's messages; the client signs again on GitHub's time
// (from the answer's Date) and says how far off the clock is.
func TestAppClockSkew(t *testing.T) {
	for _, tc := range []struct {
		skew time.Duration
		want string
	}{
		{-5 * time.Minute, "clock is about 5m0s ahead of GitHub's"},
		{20 * time.Minute, "clock is about 20m0s behind GitHub's"},
	} {
		gh := githubtest.New(t, "")
		gh.SetClockSkew(tc.skew)
		var notes []string
		c := &Client{BaseURL: gh.URL, App: testApp(t), Notify: func(s string) { notes = append(notes, s) }}
		if _, err := c.AppHookConfig(context.Background()); err != nil {
			t.Errorf("skew %v: %v", tc.skew, err)
		}
		if len(notes) != 1 || !strings.Contains(notes[0], tc.want) {
			t.Errorf("skew %v: notes %q, want one with %q", tc.skew, notes, tc.want)
		}
		if n := len(gh.Calls()); n != 2 {
			t.Errorf("skew %v: %d requests, want the refused one and one more", tc.skew, n)
		}
	}
}

// TestAppRefusals: a key of another App, and a wrong App ID, each get
// GitHub's answer and what to do, in one line.
func TestAppRefusals(t *testing.T) {
	gh := githubtest.New(t, "")
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		app  *App
		want string
	}{
		{&App{ID: githubtest.AppID, Key: other}, "A JSON web token could not be decoded: the key is not one of App " + githubtest.AppID + "'s keys"},
		{&App{ID: "999", Key: testApp(t).Key}, "Integration not found: GitHub knows no App with ID 999"},
	} {
		_, err := (&Client{BaseURL: gh.URL, App: tc.app}).AppHookConfig(context.Background())
		if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("error %v, want one line with %q", err, tc.want)
		}
	}
	// Refusals after the token is accepted (githubtest cannot suspend an
	// App or take a permission away: GitHub's answers, given as they come).
	for _, tc := range []struct {
		status   int
		body     string
		sentinel error
		want     string
	}{
		{403, `{"message":"This GitHub App is suspended."}`, ErrForbidden, "unsuspend it in its settings (Advanced)"},
		{403, `{"message":"Resource not accessible by integration"}`, ErrForbidden, "add it in the App's settings (Permissions & events)"},
	} {
		gh.Refuse(githubtest.Refusal{Status: tc.status, Body: tc.body})
		_, err := (&Client{BaseURL: gh.URL, App: testApp(t)}).AppHookConfig(context.Background())
		if !errors.Is(err, tc.sentinel) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("answer %s: error %v, want %q", tc.body, err, tc.want)
		}
	}
	if _, err := ParseKey([]byte("ghp_not a key")); err == nil || !strings.Contains(err.Error(), "Private keys") {
		t.Errorf("ParseKey of a token: %v", err)
	}
}

// TestCreateAppFromManifest: the code GitHub's form gave is exchanged once
// for the App's credentials; a second time it is refused with what to do.
func TestCreateAppFromManifest(t *testing.T) {
	gh := githubtest.New(t, "")
	manifest := `{"name":"dev app","url":"https://example.com","hook_attributes":{"url":"https://relay.example/abc"},"redirect_url":"http://127.0.0.1:1/callback","default_events":["issues"],"default_permissions":{"issues":"read"}}`
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.PostForm(gh.WebURL+"/settings/apps/new?state=xyz", url.Values{"manifest": {manifest}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	code := loc.Query().Get("code")
	if resp.StatusCode != http.StatusFound || code == "" || loc.Query().Get("state") != "xyz" {
		t.Fatalf("form answered %d, Location %s", resp.StatusCode, loc)
	}
	c := &Client{BaseURL: gh.URL}
	creds, err := c.CreateAppFromManifest(context.Background(), code)
	if err != nil {
		t.Fatal(err)
	}
	if creds.Name != "dev app" || creds.PEM != string(githubtest.KeyPEM()) || creds.WebhookSecret == nil || *creds.WebhookSecret != gh.AppHook().Secret || creds.ClientID == "" {
		t.Errorf("credentials %+v", creds)
	}
	if _, err := c.CreateAppFromManifest(context.Background(), code); !errors.Is(err, ErrCodeUsed) || !strings.Contains(err.Error(), "run hookline app new again") {
		t.Errorf("the code again: %v", err)
	}
}
