package relay_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/hookline/hookline/internal/testutil/redistest"
	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/relay"
	"github.com/hookline/hookline/relay/redisstore"
	"github.com/hookline/hookline/webhooks/provider"
)

// debugLogger logs every record of the relay, debug included, into buf.
func debugLogger(buf *relaytest.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newPrivate asks base for a private channel as hookline forward does
// (Accept: application/json) and returns its URL and token.
func newPrivate(t testing.TB, base string) (string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/new?private=1", nil)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct{ URL, Token string }
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || resp.StatusCode != http.StatusOK || answer.Token == "" {
		t.Fatalf("GET /new?private=1 = %d %+v (%v), want 200 with a URL and a token", resp.StatusCode, answer, err)
	}
	if !strings.HasPrefix(answer.URL, base+"/"+relay.PrivatePrefix) {
		t.Fatalf("private channel URL %s, want %s/%s…", answer.URL, base, relay.PrivatePrefix)
	}
	return answer.URL, answer.Token
}

// Every read path of a private channel (the stream in the three formats,
// the page, a body, a redelivery, binding a secret) needs the channel's
// token: none and a wrong one get 401, the right one (as a header or in
// the query) gets through. POSTs stay open. The token never shows in the
// relay's log, debug records included.
func TestPrivateChannelReadPaths(t *testing.T) {
	var logs relaytest.Buffer
	_, ts := newRelay(t, relay.Options{Logger: debugLogger(&logs)})
	channel, token := newPrivate(t, ts.URL)
	name := strings.TrimPrefix(channel, ts.URL+"/")
	mustPost(t, channel, `{"n":1}`, "Content-Type", "application/json", "X-GitHub-Event", "push")

	wrong := []byte(token)
	wrong[len(wrong)-1] ^= 1 // the same token but its last character
	first := []byte(token)
	first[0] ^= 1
	paths := []struct {
		what, method, url string
		header            []string
		want              string // in the answer given the token
	}{
		{"stream, smee's format", "GET", channel, []string{"Accept", "text/event-stream"}, "event: ready"},
		{"stream, hookline's format", "GET", channel + "?hookline=1", []string{"Accept", "text/event-stream"}, "event: ready"},
		{"stream, gosmee's format", "GET", ts.URL + "/events/" + name, nil, `"message":"ready"`},
		{"page", "GET", channel, nil, "<html"},
		{"page (HEAD)", "HEAD", channel, nil, ""},
		{"body", "GET", channel + "/body/1", nil, `{"n":1}`},
		{"redelivery", "POST", channel + "/redeliver/1", nil, `"redeliveryOf":1`},
		{"secret", "PUT", channel + "/secret", nil, `"verifyOnRelay":true`},
	}
	for _, p := range paths {
		withToken := func(how string) (string, []string) {
			switch how {
			case "query":
				sep := "?"
				if strings.Contains(p.url, "?") {
					sep = "&"
				}
				return p.url + sep + "token=" + url.QueryEscape(token), p.header
			default:
				return p.url, append([]string{"Authorization", "Bearer " + token}, p.header...)
			}
		}
		for _, bad := range []struct{ what, token string }{{"no token", ""}, {"a wrong token", string(wrong)}, {"a token wrong in its first character", string(first)}, {"another scheme", "Basic " + token}} {
			h := p.header
			switch {
			case strings.HasPrefix(bad.token, "Basic "):
				h = append([]string{"Authorization", bad.token}, h...)
			case bad.token != "":
				h = append([]string{"Authorization", "Bearer " + bad.token}, h...)
			}
			if code, body := do(t, p.method, p.url, "s3cret", h...); code != http.StatusUnauthorized || (p.method != "HEAD" && !strings.Contains(body, "private")) {
				t.Errorf("%s with %s = %d %.200s, want 401 saying the channel is private", p.what, bad.what, code, body)
			}
		}
		for _, how := range []string{"header", "query"} {
			u, h := withToken(how)
			code, body := do(t, p.method, u, "s3cret", h...)
			if code != http.StatusOK || !strings.Contains(body, p.want) {
				t.Errorf("%s with the token in the %s = %d %.300s, want 200 with %q", p.what, how, code, body, p.want)
			}
		}
	}
	if strings.Contains(logs.String(), token) {
		t.Errorf("the relay's log holds the token:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), name) {
		t.Errorf("the relay's log does not name the channel (is it logging at all?):\n%s", logs.String())
	}
}

// The URL /new gives a browser and a gosmee client carries the token in
// its query, and opens the channel as it is: smee-client and gosmee need
// no change for a private channel.
func TestPrivateChannelURLWithToken(t *testing.T) {
	_, ts := newRelay(t, relay.Options{})
	for _, h := range [][]string{{"Accept", "text/plain"}, {"User-Agent", "gosmee/0.32"}, nil} {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/new?private=1", nil)
		for i := 0; i+1 < len(h); i += 2 {
			req.Header.Set(h[i], h[i+1])
		}
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		u := strings.TrimSpace(string(b))
		if loc := resp.Header.Get("Location"); loc != "" && loc != u {
			t.Errorf("Location %s and body %s differ", loc, u)
		}
		if !strings.Contains(u, "/"+relay.PrivatePrefix) || !strings.Contains(u, "?token=") {
			t.Fatalf("GET /new?private=1 with %v = %d %s, want a private channel URL with its token", h, resp.StatusCode, u)
		}
		s := subscribe(t, u)
		s.ready()
		mustPost(t, strings.Split(u, "?")[0], `{"x":1}`, "Content-Type", "application/json")
		if m := message(t, s.next()); m["body"] == nil {
			t.Errorf("the delivery on %v's channel = %v", h, m)
		}
		s.close()
	}
	// A HEAD (a link checker) makes no channel.
	if code, _ := do(t, "HEAD", ts.URL+"/new?private=1", ""); code != http.StatusOK {
		t.Errorf("HEAD /new?private=1 = %d, want 200", code)
	}
}

// A channel bound to a secret keeps only deliveries whose signature
// verifies: with a secret PUT with the token, or from Options.ChannelSecrets
// (serve --channel-secrets), for a private or a public channel.
func TestVerifyOnRelay(t *testing.T) {
	const secret = "It's a Secret to Everybody"
	body := `{"zen":"Keep it logically awesome."}`
	sig, err := provider.Sign(provider.GitHub, secret, []byte(body), provider.Signing{})
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := provider.Sign(provider.GitHub, "another secret", []byte(body), provider.Signing{})
	check := func(t *testing.T, channel string, header ...string) {
		s := subscribe(t, channel, header...)
		s.ready()
		if code, msg := post(t, channel, body, "Content-Type", "application/json"); code != http.StatusUnauthorized || !strings.Contains(msg, "no signature header") {
			t.Errorf("an unsigned POST = %d %s, want 401 saying it has no signature", code, msg)
		}
		if code, msg := post(t, channel, body, "Content-Type", "application/json", "X-Hub-Signature-256", bad.Get("X-Hub-Signature-256")); code != http.StatusUnauthorized || !strings.Contains(msg, "does not match") {
			t.Errorf("a POST signed with another secret = %d %s, want 401", code, msg)
		}
		mustPost(t, channel, body, "Content-Type", "application/json", "X-Hub-Signature-256", sig.Get("X-Hub-Signature-256"))
		if ev := s.next(); ev.ID != "1" || message(t, ev)["x-hub-signature-256"] != sig.Get("X-Hub-Signature-256") {
			t.Errorf("the stream's first delivery = %+v, want the signed one as id 1", ev)
		}
	}
	t.Run("secret PUT to a private channel", func(t *testing.T) {
		srv, ts := newRelay(t, relay.Options{})
		channel, token := newPrivate(t, ts.URL)
		if code, msg := do(t, "PUT", channel+"/secret", secret, "Authorization", "Bearer "+token); code != http.StatusOK {
			t.Fatalf("PUT secret = %d %s", code, msg)
		}
		check(t, channel, "Authorization", "Bearer "+token)
		if st := srv.Stats(); st.Refused.Unsigned != 2 || st.Retained != 1 {
			t.Errorf("stats: %d refused unsigned, %d retained; want 2 and 1", st.Refused.Unsigned, st.Retained)
		}
		// Unbound: anything goes again.
		if code, msg := do(t, "DELETE", channel+"/secret", "", "Authorization", "Bearer "+token); code != http.StatusOK || !strings.Contains(msg, "false") {
			t.Fatalf("DELETE secret = %d %s", code, msg)
		}
		mustPost(t, channel, body)
	})
	t.Run("channel secrets of the relay", func(t *testing.T) {
		_, ts := newRelay(t, relay.Options{ChannelSecrets: map[string]string{"bound-channel-0123456789": secret}})
		check(t, ts.URL+"/bound-channel-0123456789")
		mustPost(t, ts.URL+"/another-channel-0123456789", body) // other channels stay open
		if code, msg := do(t, "PUT", ts.URL+"/another-channel-0123456789/secret", secret); code != http.StatusConflict {
			t.Errorf("PUT secret on a public channel = %d %s, want 409", code, msg)
		}
	})
}

// With PrivateOnly every channel is private, and a channel without a token
// does not exist; a private channel's name that the relay does not know
// (it restarted without a data directory) is not made public.
func TestPrivateOnlyAndUnknownPrivateChannels(t *testing.T) {
	_, ts := newRelay(t, relay.Options{PrivateOnly: true})
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/new", nil)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var answer struct{ URL, Token string }
	json.NewDecoder(resp.Body).Decode(&answer)
	resp.Body.Close()
	if answer.Token == "" {
		t.Fatalf("GET /new on a private-only relay gave no token: %+v", answer)
	}
	public := ts.URL + "/a-public-channel-0123456789"
	for _, r := range []struct{ method, url string }{{"POST", public}, {"GET", public}, {"GET", ts.URL + "/events/a-public-channel-0123456789"}} {
		if code, msg := do(t, r.method, r.url, "{}"); code != http.StatusNotFound || !strings.Contains(msg, "private channels only") {
			t.Errorf("%s %s on a private-only relay = %d %s, want 404", r.method, r.url, code, msg)
		}
	}
	mustPost(t, answer.URL, "{}")

	_, open := newRelay(t, relay.Options{})
	gone := open.URL + "/" + relay.PrivatePrefix + "AAAAAAAAAAAAAAAAAAAAAA"
	for _, method := range []string{"POST", "GET"} {
		if code, msg := do(t, method, gone, "{}", "Accept", "text/event-stream"); code != http.StatusNotFound || !strings.Contains(msg, "no such private channel") {
			t.Errorf("%s on a private channel the relay does not know = %d %s, want 404", method, code, msg)
		}
	}
}

// The engines keep the token's hash, never the token: the bbolt file's
// bytes and every Redis key's value are searched for it (and for the hash,
// so that the search is known to see the record). A restarted relay knows
// the channel by the hash.
func TestPrivateChannelTokenIsNotStored(t *testing.T) {
	check := func(t *testing.T, stored []byte, token string) {
		t.Helper()
		sum := sha256.Sum256([]byte(token))
		if bytes.Contains(stored, []byte(token)) {
			t.Errorf("the store holds the token %s", token)
		}
		if !bytes.Contains(stored, []byte(hex.EncodeToString(sum[:]))) {
			t.Errorf("the store holds no hash of the token: is the record where the test looks?")
		}
	}
	t.Run("bbolt", func(t *testing.T) {
		dir := t.TempDir()
		srv := mustNew(t, relay.Options{DataDir: dir})
		ts := httptestServer(t, srv)
		channel, token := newPrivate(t, ts.URL)
		mustPost(t, channel, `{"n":1}`)
		ts.Close()
		srv.Close()
		if err := srv.CloseStorage(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, relay.DataFile))
		if err != nil {
			t.Fatal(err)
		}
		check(t, b, token)

		_, ts2 := newRelay(t, relay.Options{DataDir: dir})
		u := ts2.URL + strings.TrimPrefix(channel, ts.URL)
		if code, _ := do(t, "GET", u+"/body/1", ""); code != http.StatusUnauthorized {
			t.Errorf("after a restart, a body without the token = %d, want 401", code)
		}
		if code, body := do(t, "GET", u+"/body/1", "", "Authorization", "Bearer "+token); code != http.StatusOK || body != `{"n":1}` {
			t.Errorf("after a restart, the body with the token = %d %s", code, body)
		}
	})
	t.Run("redis", func(t *testing.T) {
		rs := redistest.Start(t)
		_, ts := newRelay(t, relay.Options{Store: redisstore.Opener(rs.URL(), redisstore.Options{})})
		channel, token := newPrivate(t, ts.URL)
		mustPost(t, channel, `{"n":1}`)
		if code, _ := do(t, "PUT", channel+"/secret", "the webhook secret", "Authorization", "Bearer "+token); code != http.StatusOK {
			t.Fatalf("PUT secret = %d", code)
		}
		check(t, redisValues(t, rs.URL()), token)
	})
}

// httptestServer serves srv on an httptest server the test closes itself.
func httptestServer(t *testing.T, srv *relay.Server) *httptest.Server {
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts
}

// redisValues returns every key and value of the Redis at u, read by type.
func redisValues(t *testing.T, u string) []byte {
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx := context.Background()
	var out bytes.Buffer
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		out.WriteString(k + "\n")
		typ, _ := rdb.Type(ctx, k).Result()
		var v any
		switch typ {
		case "string":
			v, err = rdb.Get(ctx, k).Result()
		case "hash":
			v, err = rdb.HGetAll(ctx, k).Result()
		case "zset":
			v, err = rdb.ZRangeWithScores(ctx, k, 0, -1).Result()
		case "stream":
			v, err = rdb.XRange(ctx, k, "-", "+").Result()
		case "set":
			v, err = rdb.SMembers(ctx, k).Result()
		case "list":
			v, err = rdb.LRange(ctx, k, 0, -1).Result()
		default:
			t.Fatalf("key %s has type %s, which the test does not read", k, typ)
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(v)
		out.Write(b)
		out.WriteString("\n")
	}
	return out.Bytes()
}

// newPrivateFrom asks base for a private channel as a client behind the
// trusted proxy with address xff; it returns the status, URL and token.
func newPrivateFrom(t testing.TB, base, xff string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/new?private=1", nil)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Forwarded-For", xff)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct{ URL, Token, Error string }
	json.NewDecoder(resp.Body).Decode(&answer)
	if resp.StatusCode != http.StatusOK && answer.Error == "" {
		t.Errorf("GET /new?private=1 = %d with no error message", resp.StatusCode)
	}
	return resp.StatusCode, answer.URL, answer.Token
}

// The attack of one IPv6 site: a new /64 of its /48 every 10 requests.
// Its network gets its share at most (10 of 1,000), refused with 429 and
// a message naming the network, and an owner from another network still
// gets a private channel. Before, each /64 made 10: the cap of 100,000
// was full in seconds, for good.
func TestPrivateChannelsPerNetwork(t *testing.T) {
	_, ts := newRelay(t, relay.Options{MaxPrivateChannels: 1000, TrustedProxies: loopbackProxy})
	made := 0
	for i := range 300 {
		switch code, _, _ := newPrivateFrom(t, ts.URL, fmt.Sprintf("2001:db8:1:%x::1", i/10)); code {
		case http.StatusOK:
			made++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("request %d = %d, want 200 or 429", i, code)
		}
	}
	if made == 0 || made > 10 {
		t.Errorf("one /48 made %d private channels, want 1-10 (its share of 1,000)", made)
	}
	if code, _, _ := newPrivateFrom(t, ts.URL, "203.0.113.9"); code != http.StatusOK {
		t.Errorf("an owner from another network got %d, want a private channel", code)
	}
}

// A relay full of private channels: the oldest never used makes room for a
// newcomer; a channel in use (here: one that received a delivery) is never
// taken.
func TestFullRelayTakesTheOldestUnusedPrivateChannel(t *testing.T) {
	_, ts := newRelay(t, relay.Options{MaxPrivateChannels: 30, TrustedProxies: loopbackProxy})
	mk := func(xff string) (string, string) {
		t.Helper()
		code, u, token := newPrivateFrom(t, ts.URL, xff)
		if code != http.StatusOK {
			t.Fatalf("a private channel for %s = %d, want 200", xff, code)
		}
		return u, token
	}
	// Asked without the token (401: it exists, 404: it does not), which
	// is no use of the channel; a read with the token would be.
	exists := func(u string) bool {
		code, _ := do(t, "HEAD", u, "")
		if code != http.StatusUnauthorized && code != http.StatusNotFound {
			t.Fatalf("HEAD %s = %d, want 401 or 404", u, code)
		}
		return code == http.StatusUnauthorized
	}
	owner, _ := mk("198.51.100.1")
	mustPost(t, owner, `{"zen":"Design for failure."}`, "Content-Type", "application/json")
	var first string
	for n := range 29 { // the relay is full: 30
		u, _ := mk(fmt.Sprintf("192.0.2.%d", 1+n/10))
		if n == 0 {
			first = u
		}
	}
	if !exists(first) {
		t.Fatal("the first stranger's channel is gone before the relay was full")
	}
	mk("203.0.113.50")
	if exists(first) {
		t.Error("the oldest channel never used is still there after a newcomer made one on a full relay")
	}
	if !exists(owner) {
		t.Error("the owner's channel, which received a delivery, was taken for a newcomer")
	}
}

// The relay answers a sender's handshake on a channel whose owner made it
// possible, and never for whoever asks: Slack's url_verification, signed
// with the Slack signing secret the channel is bound to; a hub's
// hub.challenge carrying the channel's verify token. An answered
// handshake is relayed, marked, for the channel's forward to show.
func TestHandshakes(t *testing.T) {
	const signing = "8f742231b10e8888abcd99yyyzzz85a5"
	challenge := "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
	slackBody := `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"` + challenge + `","type":"url_verification"}`
	slackPost := func(t *testing.T, channel string) (int, string) {
		t.Helper()
		h, err := provider.Sign(provider.Slack, signing, []byte(slackBody), provider.Signing{})
		if err != nil {
			t.Fatal(err)
		}
		return post(t, channel, slackBody, "Content-Type", "application/json",
			"X-Slack-Signature", h.Get("X-Slack-Signature"), "X-Slack-Request-Timestamp", h.Get("X-Slack-Request-Timestamp"))
	}
	bound, open := "slack-channel-0123456789", "open-channel-0123456789"
	_, ts := newRelay(t, relay.Options{
		ChannelSecrets:      map[string]string{bound: signing},
		ChannelVerifyTokens: map[string]string{"hub-channel-0123456789": "meatyhamhock"},
	})

	t.Run("slack url_verification on a bound channel", func(t *testing.T) {
		s := subscribe(t, ts.URL+"/"+bound+"?hookline=1")
		s.ready()
		code, answer := slackPost(t, ts.URL+"/"+bound)
		var got struct{ Challenge string }
		if code != http.StatusOK || json.Unmarshal([]byte(answer), &got) != nil || got.Challenge != challenge {
			t.Fatalf("url_verification = %d %s, want 200 {\"challenge\":%q}", code, answer, challenge)
		}
		if m := message(t, s.next()); m["x-hookline-handshake"] != "answered" || m["x-slack-signature"] == nil {
			t.Errorf("the relayed handshake: x-hookline-handshake %v; want it marked answered, with Slack's headers", m["x-hookline-handshake"])
		}
	})
	t.Run("slack url_verification elsewhere is not echoed", func(t *testing.T) {
		s := subscribe(t, ts.URL+"/"+open+"?hookline=1")
		s.ready()
		code, answer := slackPost(t, ts.URL+"/"+open)
		if code != http.StatusOK || strings.Contains(answer, challenge) {
			t.Errorf("url_verification on an unbound channel = %d %s; want it relayed, the challenge not echoed", code, answer)
		}
		if m := message(t, s.next()); m["x-hookline-handshake"] != nil {
			t.Errorf("an unanswered handshake is marked %v", m["x-hookline-handshake"])
		}
		// Nor may a sender mark one itself.
		mustPost(t, ts.URL+"/"+open, "{}", "X-Hookline-Handshake", "answered")
		if m := message(t, s.next()); m["x-hookline-handshake"] != nil {
			t.Errorf("a sender's x-hookline-handshake was relayed: %v", m["x-hookline-handshake"])
		}
	})
	t.Run("hub.challenge", func(t *testing.T) {
		channel := ts.URL + "/hub-channel-0123456789"
		s := subscribe(t, channel+"?hookline=1")
		s.ready()
		hub := "?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token="
		for _, tt := range []struct {
			url  string
			code int
			want string
		}{
			{channel + hub + "meatyhamhock", http.StatusOK, "1158201444"},
			{channel + hub + "guessed", http.StatusForbidden, "not this channel's verify token"},
			{channel + hub, http.StatusForbidden, "not this channel's verify token"},
			{ts.URL + "/" + open + hub + "meatyhamhock", http.StatusForbidden, "has no verify token"},
		} {
			if code, body := do(t, http.MethodGet, tt.url, ""); code != tt.code || !strings.Contains(body, tt.want) {
				t.Errorf("GET %s = %d %s, want %d with %q", tt.url, code, body, tt.code, tt.want)
			}
		}
		m := message(t, s.next())
		if m["x-hookline-handshake"] != "answered" || fmt.Sprint(m["query"]) != "map[hub.challenge:1158201444 hub.mode:subscribe]" {
			t.Errorf("the relayed handshake: mark %v, query %v; want it marked, without the verify token", m["x-hookline-handshake"], m["query"])
		}
	})
	t.Run("verify token PUT to a private channel", func(t *testing.T) {
		channel, token := newPrivate(t, ts.URL)
		hub := channel + "?hub.mode=subscribe&hub.challenge=42&hub.verify_token=chosen-by-the-owner"
		if code, body := do(t, http.MethodGet, hub, ""); code != http.StatusForbidden {
			t.Errorf("before the token is set: %d %s, want 403", code, body)
		}
		if code, body := do(t, http.MethodPut, channel+"/verify-token", "chosen-by-the-owner"); code != http.StatusUnauthorized {
			t.Errorf("PUT verify-token without the read token = %d %s, want 401", code, body)
		}
		if code, body := do(t, http.MethodPut, channel+"/verify-token", "chosen-by-the-owner", "Authorization", "Bearer "+token); code != http.StatusOK {
			t.Fatalf("PUT verify-token = %d %s", code, body)
		}
		if code, body := do(t, http.MethodGet, hub, ""); code != http.StatusOK || body != "42" {
			t.Errorf("hub.challenge with the owner's token = %d %q, want 200 42", code, body)
		}
	})
}
