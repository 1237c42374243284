package githubapi

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/githubtest"
	"github.com/hookline/hookline/internal/testutil/testenv"
)

// receiver is a webhook URL that records what GitHub sent and answers
// with status.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []http.Header
	bodies [][]byte
	status int
}

func newReceiver(t *testing.T, status int) *receiver {
	r := &receiver{status: status}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, req.Header.Clone())
		r.bodies = append(r.bodies, b)
		status := r.status
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// waitFor waits until cond (what the GitHub server on loopback did) holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Poll(t, what, 5*time.Millisecond, cond)
}

func TestHookLifecycle(t *testing.T) {
	for _, tc := range []struct {
		name, prefix string
		owner        Owner
	}{
		{"repository", "", Repo("octo/hello")},
		{"organisation", "", Org("octo-org")},
		{"GitHub Enterprise Server layout", "/api/v3", Repo("octo/hello")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gh := githubtest.New(t, tc.prefix)
			recv := newReceiver(t, http.StatusOK)
			c := &Client{BaseURL: gh.URL, Token: githubtest.Token}
			ctx := context.Background()

			h, err := c.CreateHook(ctx, tc.owner, HookConfig{URL: recv.URL, Secret: "s3cret"}, []string{"*"})
			if err != nil {
				t.Fatal(err)
			}
			if h.ID == 0 || h.Config.URL != recv.URL || !slices.Equal(h.Events, []string{"*"}) {
				t.Errorf("CreateHook = %+v, want an id, url %s, events [*]", h, recv.URL)
			}
			// GitHub pings a new hook, signed with its secret.
			waitFor(t, "the ping", func() bool { return recv.count() > 0 })
			mac := hmac.New(sha256.New, []byte("s3cret"))
			mac.Write(recv.bodies[0])
			if got, want := recv.got[0].Get("X-Hub-Signature-256"), "sha256="+hex.EncodeToString(mac.Sum(nil)); got != want || recv.got[0].Get("X-GitHub-Event") != "ping" {
				t.Errorf("ping: event %q signature %q, want ping %q", recv.got[0].Get("X-GitHub-Event"), got, want)
			}

			hooks, err := c.Hooks(ctx, tc.owner)
			if err != nil || len(hooks) != 1 || hooks[0].ID != h.ID || hooks[0].Config.URL != recv.URL {
				t.Fatalf("Hooks = %+v, %v; want the one created", hooks, err)
			}
			if _, err := c.UpdateHook(ctx, tc.owner, h.ID, HookConfig{URL: recv.URL, Secret: "other"}, []string{"push"}); err != nil {
				t.Fatal(err)
			}
			if got := gh.Hooks(); got[0].Secret != "other" || !slices.Equal(got[0].Events, []string{"push"}) {
				t.Errorf("after UpdateHook the server has %+v", got[0])
			}
			if err := c.DeleteHook(ctx, tc.owner, h.ID); err != nil {
				t.Fatal(err)
			}
			if hooks, err := c.Hooks(ctx, tc.owner); err != nil || len(hooks) != 0 {
				t.Errorf("Hooks after DeleteHook = %+v, %v; want none", hooks, err)
			}
			want := []string{"create-webhook", "list-webhooks", "update-webhook", "delete-webhook", "list-webhooks"}
			var got []string
			for _, op := range gh.Calls() {
				got = append(got, op[strings.IndexByte(op, '/')+1:])
			}
			if !slices.Equal(got, want) {
				t.Errorf("operations %v, want %v", got, want)
			}
		})
	}
}

// TestHooksPages: Hooks follows the Link header's next page to the end.
func TestHooksPages(t *testing.T) {
	gh := githubtest.New(t, "")
	var want []int64
	for i := range 5 {
		want = append(want, gh.AddHook(githubtest.Hook{Owner: "/repos/octo/hello", URL: "https://relay.example/" + strconv.Itoa(i), Events: []string{"*"}, Active: true}))
	}
	gh.AddHook(githubtest.Hook{Owner: "/repos/octo/other", URL: "https://relay.example/x"})
	c := &Client{BaseURL: gh.URL, Token: githubtest.Token, PerPage: 2} // three pages
	hooks, err := c.Hooks(context.Background(), Repo("octo/hello"))
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, h := range hooks {
		got = append(got, h.ID)
	}
	if !slices.Equal(got, want) || len(gh.Calls()) != 3 {
		t.Errorf("Hooks = %v in %d requests, want %v in 3", got, len(gh.Calls()), want)
	}
}

func TestDeliveries(t *testing.T) {
	gh := githubtest.New(t, "")
	recv := newReceiver(t, http.StatusOK)
	owner := Repo("octo/hello")
	id := gh.AddHook(githubtest.Hook{Owner: "/repos/octo/hello", URL: recv.URL, Secret: "s", Events: []string{"*"}, Active: true})
	var made []githubtest.HookDelivery
	for i := range 5 {
		recv.mu.Lock()
		recv.status = []int{200, 500, 200, 404, 200}[i]
		recv.mu.Unlock()
		d, err := gh.Deliver(id, "issues", []byte(`{"action":"opened","n":`+strconv.Itoa(i)+`}`))
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, d)
	}
	c := &Client{BaseURL: gh.URL, Token: githubtest.Token, PerPage: 2} // three pages
	ctx := context.Background()

	var ids []int64
	if err := c.Deliveries(ctx, owner, id, "", func(d HookDelivery) bool {
		ids = append(ids, d.ID)
		if d.Name() != "issues.opened" {
			t.Errorf("delivery %d is %q, want issues.opened", d.ID, d.Name())
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	want := []int64{made[4].ID, made[3].ID, made[2].ID, made[1].ID, made[0].ID}
	if !slices.Equal(ids, want) {
		t.Errorf("Deliveries = %v, want every one, newest first: %v", ids, want)
	}
	var failed []int
	c.Deliveries(ctx, owner, id, "failure", func(d HookDelivery) bool { failed = append(failed, d.StatusCode); return true })
	if !slices.Equal(failed, []int{404, 500}) {
		t.Errorf("failed deliveries' statuses = %v, want [404 500]", failed)
	}
	n := 0
	c.Deliveries(ctx, owner, id, "", func(HookDelivery) bool { n++; return n < 3 })
	if n != 3 {
		t.Errorf("Deliveries called each %d times after it returned false at 3", n)
	}

	d, err := c.Delivery(ctx, owner, id, made[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.GUID != made[1].GUID || d.Request.Headers["X-Hub-Signature-256"] != made[1].Header["X-Hub-Signature-256"] || string(d.Request.Payload) != `{"action":"opened","n":1}` {
		t.Errorf("Delivery = %+v (payload %s), want the second delivery", d.HookDelivery, d.Request.Payload)
	}

	before := recv.count()
	if err := c.Redeliver(ctx, owner, id, made[1].ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the redelivery", func() bool { return recv.count() > before })
	if got := string(recv.bodies[before]); got != string(made[1].Payload) {
		t.Errorf("redelivered %s, want %s", got, made[1].Payload)
	}
}

func TestErrors(t *testing.T) {
	// The rate limit resets an hour from now, in the middle of a minute:
	// the error names the minute (the reset plus the second GitHub's
	// advice adds), which a reset near a minute's end would cross.
	resetAt := time.Now().Add(time.Hour).Truncate(time.Minute).Add(30 * time.Second)
	gh := githubtest.New(t, "")
	ctx := context.Background()
	repo := Repo("octo/hello")
	for _, tc := range []struct {
		name    string
		token   string
		refusal *githubtest.Refusal
		call    func(c *Client) error
		is      error
		want    []string
	}{
		{name: "bad token", token: "nope", call: func(c *Client) error { _, err := c.Hooks(ctx, repo); return err },
			is: ErrUnauthorized, want: []string{"401 Bad credentials", "GITHUB_TOKEN or GH_TOKEN", "gh auth login"}},
		{name: "no such hook", token: githubtest.Token, call: func(c *Client) error { return c.DeleteHook(ctx, repo, 7) },
			is: ErrNotFound, want: []string{"DELETE /repos/octo/hello/hooks/7: 404", "admin:repo_hook"}},
		{name: "scope", token: githubtest.Token,
			refusal: &githubtest.Refusal{Status: 403, Body: `{"message":"Resource not accessible by personal access token"}`},
			call: func(c *Client) error {
				_, err := c.CreateHook(ctx, Org("o"), HookConfig{URL: "https://x"}, nil)
				return err
			},
			is: ErrForbidden, want: []string{"403 Resource not accessible", "admin:org_hook", "admin rights on organisation o"}},
		{name: "validation", token: githubtest.Token,
			refusal: &githubtest.Refusal{Status: 422, Body: `{"message":"Validation Failed","errors":[{"resource":"Hook","code":"custom","message":"Hook already exists on this repository"}]}`},
			call: func(c *Client) error {
				_, err := c.CreateHook(ctx, repo, HookConfig{URL: "https://x"}, nil)
				return err
			},
			is: ErrInvalid, want: []string{"422 Validation Failed (Hook already exists on this repository)"}},
		{name: "rate limit used up", token: githubtest.Token,
			refusal: &githubtest.Refusal{Status: 403, Header: http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {strconv.FormatInt(resetAt.Unix(), 10)}}, Body: `{"message":"API rate limit exceeded"}`},
			call:    func(c *Client) error { _, err := c.Hooks(ctx, repo); return err },
			is:      ErrRateLimited, want: []string{"403 API rate limit exceeded", "rate limit is used up; try again after " + resetAt.Format("15:04")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.refusal != nil {
				gh.Refuse(*tc.refusal)
			}
			err := tc.call(&Client{BaseURL: gh.URL, Token: tc.token})
			if !errors.Is(err, tc.is) {
				t.Fatalf("error %v, want one wrapping %v", err, tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), githubtest.Token) {
				t.Errorf("error %q: want one line, without the token", err)
			}
		})
	}
}

// TestRateLimitWaits: a secondary limit's Retry-After, and a primary
// limit that resets soon, are waited out (told through Notify), then the
// request is sent again.
func TestRateLimitWaits(t *testing.T) {
	gh := githubtest.New(t, "")
	gh.Refuse(
		githubtest.Refusal{Status: 403, Header: http.Header{"Retry-After": {"30"}}, Body: `{"message":"You have exceeded a secondary rate limit."}`},
		githubtest.Refusal{Status: 403, Header: http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {strconv.FormatInt(time.Now().Add(20*time.Second).Unix(), 10)}}, Body: `{"message":"API rate limit exceeded"}`},
		githubtest.Refusal{Status: 403, Body: `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`},
	)
	var waits []time.Duration
	var notes []string
	c := &Client{BaseURL: gh.URL, Token: githubtest.Token, Notify: func(s string) { notes = append(notes, s) },
		Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
	if _, err := c.Hooks(context.Background(), Repo("octo/hello")); err != nil {
		t.Fatal(err)
	}
	if len(waits) != 3 || waits[0] != 30*time.Second || waits[1] < 15*time.Second || waits[1] > 22*time.Second || waits[2] != time.Minute {
		t.Errorf("waits %v, want 30s, about 20s (to the reset), 1m (GitHub's advice without a header)", waits)
	}
	if len(notes) != 3 || !strings.Contains(notes[0], "GitHub's rate limit: waiting 30s before GET /repos/octo/hello/hooks") {
		t.Errorf("notes %q", notes)
	}

	// A 429 is waited out once, by the Client (with a note), not first by
	// rest's retries as well.
	gh.Refuse(githubtest.Refusal{Status: 429, Header: http.Header{"Retry-After": {"2"}}, Body: `{"message":"You have exceeded a secondary rate limit."}`})
	waits, notes = nil, nil
	if _, err := c.Hooks(context.Background(), Repo("octo/hello")); err != nil {
		t.Fatal(err)
	}
	if len(waits) != 1 || waits[0] != 2*time.Second || len(notes) != 1 {
		t.Errorf("after a 429: waits %v, notes %q; want one wait of 2s, told", waits, notes)
	}
}

func TestOwnerCheck(t *testing.T) {
	for _, tc := range []struct {
		o  Owner
		ok bool
	}{
		{Repo("octo/hello"), true},
		{Repo("octo/hello.go"), true},
		{Org("octo-org"), true},
		{Repo("octo"), false},
		{Repo("octo/hello/x"), false},
		{Repo("../x"), false},
		{Org("a b"), false},
		{Org("-octo"), false},
		{Org("_octo"), false},
		{Repo("octo/.hello"), false},
		{Repo("octo/hello_x-1.y"), true},
		{Org("océ"), false},
		{Org(strings.Repeat("a", 100)), true},
		{Org(strings.Repeat("a", 101)), false},
		{Repo("octo/"), false},
		{Owner{Repo: "a/b", Org: "c"}, false},
		{Owner{}, false},
	} {
		if err := tc.o.Check(); (err == nil) != tc.ok {
			t.Errorf("%+v.Check() = %v, want ok %v", tc.o, err, tc.ok)
		}
	}
}
