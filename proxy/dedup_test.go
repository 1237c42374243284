package proxy_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/internal/testutil/ssetest"
	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/relay"
	"github.com/hookline/hookline/webhooks/provider"
)

// frame is one SSE event carrying a delivery in hookline's format.
func frame(eventID, deliveryID string, body string) string {
	s := ""
	if eventID != "" {
		s = "id: " + eventID + "\n"
	}
	return s + fmt.Sprintf(`data: {"x-github-event":"issues","x-github-delivery":%q,"content-type":"application/json","bodyB":%q,"query":{}}`,
		deliveryID, b64(body)) + "\n\n"
}

// streamOnce serves stream to the first connection and holds later ones
// open with nothing.
func streamOnce(t *testing.T, stream string) *ssetest.Server {
	return ssetest.NewServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			ssetest.WriteStream(w, []byte(stream))
		} else {
			ssetest.WriteStream(w, nil)
		}
		ssetest.HoldOpen(r)
	})
}

func TestClientSkipsDuplicates(t *testing.T) {
	tests := []struct {
		name        string
		stream      string
		opts        proxy.Options
		wantTarget  string // the delivery ids the target got, in order
		wantDup     int
		wantRedeliv int
	}{
		{
			name:       "the same event twice",
			stream:     frame("1", "a", "{}") + frame("1", "a", "{}") + frame("2", "b", "{}"),
			wantTarget: "a,b", wantDup: 1,
		},
		{
			name:       "a repeated delivery id with a new id from a relay with durable ids is a redelivery",
			stream:     frame("1", "a", "{}") + frame("2", "b", "{}") + frame("3", "a", "{}"),
			wantTarget: "a,b,a", wantRedeliv: 1,
		},
		{
			name: "ids per connection (smee.io): the delivery id decides",
			stream: "id: 0\nevent: ready\ndata: {}\n\n" + frame("1", "a", "{}") + frame("2", "b", "{}") +
				"id: 3\nevent: ping\ndata: {}\n\n" + frame("4", "a", "{}"),
			wantTarget: "a,b", wantDup: 1,
		},
		{
			name:       "no ids at all",
			stream:     frame("", "a", "{}") + frame("", "a", "{}") + frame("", "b", "{}"),
			wantTarget: "a,b", wantDup: 1,
		},
		{
			name:       "deliveries without an id are never duplicates",
			stream:     frame("1", "", "{}") + frame("2", "", "{}"),
			wantTarget: ",",
		},
		{
			name:       "off",
			stream:     frame("1", "a", "{}") + frame("1", "a", "{}"),
			opts:       proxy.Options{DedupWindow: -1},
			wantTarget: "a,a",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := streamOnce(t, tt.stream)
			target := &relaytest.Sink{}
			opts := tt.opts
			opts.URL, opts.Targets = srv.URL+"/chan", []proxy.Target{{URL: httptestServer(t, target)}}
			res := newResults()
			opts.OnResult = res.add
			n := strings.Count(tt.stream, "x-github-delivery")
			c, _, _ := startClient(t, opts)
			all := res.wait(t, n)
			var ids []string
			for _, a := range target.Arrivals() {
				ids = append(ids, a.ID)
			}
			if got := strings.Join(ids, ","); got != tt.wantTarget {
				t.Errorf("the target got %q, want %q", got, tt.wantTarget)
			}
			s := c.Stats()
			if s.Duplicates != int64(tt.wantDup) || s.Redeliveries != int64(tt.wantRedeliv) {
				t.Errorf("Duplicates, Redeliveries = %d, %d; want %d, %d", s.Duplicates, s.Redeliveries, tt.wantDup, tt.wantRedeliv)
			}
			dups := 0
			for _, r := range all {
				if r.Duplicate {
					dups++
					if len(r.Targets) > 0 || !r.OK() {
						t.Errorf("a duplicate was handled: %+v", r)
					}
				}
			}
			if dups != tt.wantDup {
				t.Errorf("%d Results marked Duplicate, want %d", dups, tt.wantDup)
			}
		})
	}
}

// The relay's redeliver button (POST /<channel>/redeliver/<id>) repeats a
// delivery with its X-GitHub-Delivery and a new event id: it is forwarded.
func TestClientForwardsARelayRedelivery(t *testing.T) {
	rl := relaytest.Start(t, relay.Options{})
	target := &relaytest.Sink{}
	cw := newConnWatch()
	res := newResults()
	c, _, _ := startClient(t, proxy.Options{URL: rl.Channel, Targets: []proxy.Target{{URL: httptestServer(t, target)}}, OnState: cw.on, OnResult: res.add})
	cw.waitConnected(t)
	body := relaytest.Body(1, 10)
	rl.Publish(t, nil, 1, body)
	res.wait(t, 1)
	redeliver(t, rl.Channel, 1)
	r := res.wait(t, 1)[1]
	if !r.Redelivery || r.Duplicate || len(r.Targets) == 0 || !r.Targets[0].OK() {
		t.Errorf("redelivery: Redelivery %v, Duplicate %v, Target %+v; want forwarded as a redelivery", r.Redelivery, r.Duplicate, r.Targets)
	}
	if got := target.Arrivals(); len(got) != 2 || got[1].ID != relaytest.ID(1) {
		t.Errorf("the target got %d deliveries, want the original and the redelivery", len(got))
	}
	if s := c.Stats(); s.Redeliveries != 1 || s.Duplicates != 0 {
		t.Errorf("stats = %+v", s)
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// A sender that retries on its own (Standard Webhooks, here) sends a
// delivery again with the same webhook-id, freshly signed: through the
// hookline relay that is a new event, and it is a duplicate, not a
// redelivery. The relay page's Redeliver of it is marked by the relay and
// forwarded again.
func TestClientSkipsASendersRetryButForwardsARelayRedelivery(t *testing.T) {
	rl := relaytest.Start(t, relay.Options{})
	target := &relaytest.Sink{}
	cw := newConnWatch()
	res := newResults()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	c, _, _ := startClient(t, proxy.Options{URL: rl.Channel, Secret: secret, Targets: []proxy.Target{{URL: httptestServer(t, target)}}, OnState: cw.on, OnResult: res.add})
	cw.waitConnected(t)
	body := []byte(`{"type":"invoice.paid","data":{"n":1}}`)
	send := func(at time.Time) {
		t.Helper()
		h, err := provider.Sign(provider.Standard, secret, body, provider.Signing{ID: "msg_retried", At: at})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, rl.Channel, bytes.NewReader(body))
		req.Header = h
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST: %d", resp.StatusCode)
		}
	}
	now := time.Now()
	send(now.Add(-time.Minute)) // the first attempt
	send(now)                   // the sender's retry: signed again, the same webhook-id
	rs := res.wait(t, 2)
	if rs[0].Delivery.ID != "msg_retried" || rs[0].Duplicate || rs[0].Verification != proxy.VerificationPassed {
		t.Errorf("first: id %q, Duplicate %v, %s; want msg_retried forwarded, verified", rs[0].Delivery.ID, rs[0].Duplicate, rs[0].Verification)
	}
	if !rs[1].Duplicate || rs[1].Redelivery || len(rs[1].Targets) > 0 {
		t.Errorf("the sender's retry: Duplicate %v, Redelivery %v, %d targets; want a duplicate, not forwarded", rs[1].Duplicate, rs[1].Redelivery, len(rs[1].Targets))
	}
	redeliver(t, rl.Channel, 1)
	r := res.wait(t, 1)[2]
	if !r.Redelivery || r.Duplicate || len(r.Targets) == 0 || !r.Targets[0].OK() {
		t.Errorf("the relay's redelivery: Redelivery %v, Duplicate %v, Targets %+v; want forwarded as a redelivery", r.Redelivery, r.Duplicate, r.Targets)
	}
	if got := len(target.Arrivals()); got != 2 {
		t.Errorf("the target got %d deliveries, want the first and the relay's redelivery", got)
	}
	if s := c.Stats(); s.Redeliveries != 1 || s.Duplicates != 1 {
		t.Errorf("Stats: %d redeliveries, %d duplicates; want 1, 1", s.Redeliveries, s.Duplicates)
	}
}

// A sender's handshake is shown, never forwarded: a hub.challenge the relay
// answered, and a Slack url_verification it did not (the channel is not
// bound to the signing secret).
func TestClientShowsHandshakesAndForwardsNone(t *testing.T) {
	const name = "handshake-0123456789ab"
	rl := relaytest.Start(t, relay.Options{ChannelVerifyTokens: map[string]string{name: "meatyhamhock"}})
	channel := rl.Base + "/" + name
	target := &relaytest.Sink{}
	cw := newConnWatch()
	res := newResults()
	c, _, _ := startClient(t, proxy.Options{URL: channel, Targets: []proxy.Target{{URL: httptestServer(t, target)}}, OnState: cw.on, OnResult: res.add})
	cw.waitConnected(t)

	resp, err := http.Get(channel + "?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meatyhamhock")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("hub.challenge: %d", resp.StatusCode)
	}
	body := []byte(`{"token":"x","challenge":"3eZbrw1aBm2rZ","type":"url_verification"}`)
	h, _ := provider.Sign(provider.Slack, "8f742231b10e8888abcd99yyyzzz85a5", body, provider.Signing{})
	req, _ := http.NewRequest(http.MethodPost, channel, bytes.NewReader(body))
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	rs := res.wait(t, 2)
	for i, want := range []struct {
		kind     string
		answered bool
	}{{"hub.challenge", true}, {"slack url_verification", false}} {
		if r := rs[i]; r.Handshake != want.kind || r.HandshakeAnswered != want.answered || len(r.Targets) > 0 {
			t.Errorf("result %d: Handshake %q, answered %v, %d targets; want %q, %v, not forwarded", i, r.Handshake, r.HandshakeAnswered, len(r.Targets), want.kind, want.answered)
		}
	}
	if n := len(target.Arrivals()); n != 0 {
		t.Errorf("the target got %d requests, want none", n)
	}
	if s := c.Stats(); s.Handshakes != 2 || s.Forwarded != 0 {
		t.Errorf("Stats: %d handshakes, %d forwarded; want 2, 0", s.Handshakes, s.Forwarded)
	}
}

// redeliver asks the relay to publish delivery id of channel again (its
// page's Redeliver button).
func redeliver(t *testing.T, channel string, id int) {
	t.Helper()
	resp, err := http.Post(fmt.Sprintf("%s/redeliver/%d", channel, id), "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("redeliver: %d", resp.StatusCode)
	}
}
