package relay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookline/hookline/internal/testutil/redistest"
	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/internal/wire"
	"github.com/hookline/hookline/relay"
	"github.com/hookline/hookline/relay/redisstore"
)

// replica is one relay of several sharing a Redis: a relay.Server on an
// httptest server, as `hookline serve --redis-url` behind a load balancer.
type replica struct {
	t    testing.TB
	srv  *relay.Server
	ts   *httptest.Server
	once sync.Once
}

func newReplica(t testing.TB, redisURL string, opts relay.Options) *replica {
	t.Helper()
	return newReplicaWith(t, redisURL, redisstore.Options{}, opts)
}

// kill stops the replica abruptly: every connection is cut (streams see
// an error, not a clean end), as when its process dies.
func (r *replica) kill() {
	r.once.Do(func() {
		r.ts.CloseClientConnections()
		r.srv.Close()
		r.ts.Close()
		r.srv.CloseStorage()
	})
}

func (r *replica) url(channel string) string { return r.ts.URL + "/" + channel }

// health returns the status code and document of GET /healthz.
func (r *replica) health(t *testing.T) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(r.ts.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatalf("/healthz: %v", err)
	}
	return resp.StatusCode, doc
}

// postID POSTs a JSON body and returns the id the relay gave it.
func postID(t *testing.T, url, body string, header ...string) int64 {
	t.Helper()
	code, resp := post(t, url, body, append([]string{"Content-Type", "application/json"}, header...)...)
	if code != http.StatusOK {
		t.Fatalf("POST %s = %d %s, want 200", url, code, resp)
	}
	var answer struct{ ID int64 }
	if err := json.Unmarshal([]byte(resp), &answer); err != nil {
		t.Fatalf("POST answer %q: %v", resp, err)
	}
	return answer.ID
}

func body(seq int) string { return fmt.Sprintf(`{"seq":%d}`, seq) }

// A delivery POSTed to one replica reaches the subscribers of every
// replica, with ids that grow across replicas; an Idempotency-Key and a
// redelivery work across them too.
func TestRedisReplicasRelayToEachOther(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	a := newReplica(t, rs.URL(), relay.Options{})
	b := newReplica(t, rs.URL(), relay.Options{})
	subA := subscribe(t, a.url("shared"))
	subA.ready()
	subB := subscribe(t, b.url("shared")+"?hookline=1")
	subB.ready()

	for i := 1; i <= 6; i++ {
		to := a
		if i%2 == 0 {
			to = b
		}
		if id := postID(t, to.url("shared"), body(i), "X-GitHub-Event", "push"); id != int64(i) {
			t.Errorf("POST #%d answered id %d, want %d", i, id, i)
		}
		for name, sub := range map[string]*stream{"A": subA, "B": subB} {
			ev := sub.next()
			m := message(t, ev)
			got := fmt.Sprint(m["body"]) // smee.io's shape on A, hookline's bodyB on B
			if name == "B" {
				exact, _ := bodyOf(t, b.url("shared"), ev)
				got = string(exact)
			}
			if want := map[string]string{"A": fmt.Sprint(map[string]any{"seq": float64(i)}), "B": body(i)}[name]; ev.ID != strconv.Itoa(i) || got != want || m["x-github-event"] != "push" {
				t.Errorf("replica %s got id %s %v, want id %d body %s", name, ev.ID, m, i, body(i))
			}
		}
	}

	// The same Idempotency-Key on the other replica: a duplicate.
	first := postID(t, a.url("shared"), body(7), "Idempotency-Key", "k7")
	subA.next()
	subB.next()
	code, resp := post(t, b.url("shared"), body(7), "Content-Type", "application/json", "Idempotency-Key", "k7")
	if want := fmt.Sprintf("{\"duplicate\":true,\"id\":%d}\n", first); code != http.StatusOK || resp != want {
		t.Errorf("the same key on replica B = %d %q, want 200 %q", code, resp, want)
	}
	// A redelivery on B of a delivery POSTed to A.
	code, resp = post(t, b.url("shared")+"/redeliver/1", "")
	if code != http.StatusOK || resp != "{\"id\":8,\"redeliveryOf\":1}\n" {
		t.Errorf("redeliver 1 on B = %d %q", code, resp)
	}
	if ev := subA.next(); ev.ID != "8" || !strings.Contains(ev.Data, `"body":{"seq":1}`) {
		t.Errorf("replica A: redelivery = %+v, want id 8 with seq 1", ev)
	}
	if ev := subB.next(); ev.ID != "8" || !strings.Contains(ev.Data, `"body":`+body(1)+`,`) || !strings.Contains(ev.Data, `"bodyB":null`) {
		t.Errorf("replica B: redelivery = %+v, want id 8 with seq 1", ev)
	}

	for name, r := range map[string]*replica{"A": a, "B": b} {
		code, doc := r.health(t)
		if code != http.StatusOK || doc["status"] != "ok" || doc["shared"] != true || doc["retained"] != float64(8) || doc["subscribers"] != float64(1) {
			t.Errorf("replica %s /healthz = %d %v", name, code, doc)
		}
	}
}

// A subscriber that leaves replica A and comes back on replica B with its
// Last-Event-ID gets everything it missed, once, then the live ones.
func TestRedisResumeOnOtherReplica(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	a := newReplica(t, rs.URL(), relay.Options{})
	b := newReplica(t, rs.URL(), relay.Options{})
	sub := subscribe(t, a.url("move"))
	sub.ready()
	for i := 1; i <= 3; i++ {
		postID(t, a.url("move"), body(i))
		if ev := sub.next(); ev.ID != strconv.Itoa(i) {
			t.Fatalf("on A: id %s, want %d", ev.ID, i)
		}
	}
	sub.close()
	for i := 4; i <= 7; i++ {
		to := a
		if i%2 == 0 {
			to = b
		}
		postID(t, to.url("move"), body(i))
	}
	sub = subscribe(t, b.url("move"), "Last-Event-ID", "3")
	sub.ready()
	postID(t, a.url("move"), body(8)) // live, through Redis
	for i := 4; i <= 8; i++ {
		if ev := sub.next(); ev.ID != strconv.Itoa(i) || !strings.Contains(ev.Data, `"body":`+body(i)) {
			t.Fatalf("on B after Last-Event-ID 3: %+v, want id %d", ev, i)
		}
	}
}

// Replica A dies (every connection cut) while deliveries are POSTed to
// both replicas and a subscriber reads from A: the subscriber moves to B
// with its Last-Event-ID, the publisher retries on B what A did not answer
// (with an Idempotency-Key, in case A stored it before dying), and the
// subscriber gets every delivery once, in order.
func TestRedisReplicaKilledMidStream(t *testing.T) {
	t.Parallel()
	const total, killAt = 200, 60
	rs := redistest.Start(t)
	a := newReplica(t, rs.URL(), relay.Options{})
	b := newReplica(t, rs.URL(), relay.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()

	var mu sync.Mutex
	var got []string // "id seq"
	all := make(chan struct{})
	subscriberDone := make(chan error, 1)
	killed := make(chan struct{})
	go func() {
		subscriberDone <- func() error {
			url, last := a.url("kill"), "0" // from the start: the POSTs do not wait for the stream
			for moves := 0; moves < 3; moves++ {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				req.Header.Set("Accept", "text/event-stream")
				req.Header.Set("Last-Event-ID", last)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return err
				}
				st := &stream{t: t, resp: resp, events: make(chan event, 4096)}
				go st.read()
				for ev := range st.events {
					if ev.ID == "" {
						continue
					}
					var m struct{ Body struct{ Seq int } }
					json.Unmarshal([]byte(ev.Data), &m)
					mu.Lock()
					got = append(got, ev.ID+" "+strconv.Itoa(m.Body.Seq))
					n := len(got)
					mu.Unlock()
					last = ev.ID
					if n == killAt {
						close(killed)
					}
					if n == total {
						close(all)
						resp.Body.Close()
						return nil
					}
				}
				resp.Body.Close()
				if ctx.Err() != nil {
					return ctx.Err()
				}
				url = b.url("kill") // what the load balancer does once A is gone
			}
			return errors.New("the stream ended more than twice")
		}()
	}()

	go func() {
		<-killed
		a.kill()
	}()
	client := &http.Client{Timeout: 5 * time.Second}
	retried := 0
	for seq := 1; seq <= total; seq++ {
		targets := []*replica{a, b}
		if seq%2 == 0 {
			targets = []*replica{b, a}
		}
		for attempt := 0; ; attempt++ {
			if ctx.Err() != nil {
				t.Fatalf("delivery %d not accepted in time", seq)
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, targets[attempt%2].url("kill"), strings.NewReader(body(seq)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", fmt.Sprint("seq-", seq))
			resp, err := client.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			retried++
		}
	}
	select {
	case <-all:
	case <-ctx.Done():
	}
	if err := <-subscriberDone; err != nil {
		t.Errorf("subscriber: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d deliveries, %d POSTs retried on the other replica", total, retried)
	for i, g := range got {
		if want := fmt.Sprintf("%d %d", i+1, i+1); g != want {
			t.Fatalf("delivery #%d is %q (id seq), want %q; around it: %v", i+1, g, want, got[max(0, i-3):min(len(got), i+3)])
		}
	}
	if len(got) != total {
		t.Errorf("the subscriber got %d deliveries, want %d", len(got), total)
	}
}

// Redis dies and comes back: meanwhile POSTs get 503 with Retry-After and
// a message saying why, /healthz says 503, a new stream gets 503, and open
// streams stay open (pings go on); once Redis is back, without a restart
// of the relays, POSTs work again and the open streams go on from where
// they were, on both replicas.
func TestRedisRestart(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	opts := relay.Options{PingInterval: 50 * time.Millisecond}
	a := newReplica(t, rs.URL(), opts)
	b := newReplica(t, rs.URL(), opts)
	subA := subscribe(t, a.url("outage"))
	subA.ready()
	subB := subscribe(t, b.url("outage"))
	subB.ready()
	postID(t, a.url("outage"), body(1))
	for _, sub := range []*stream{subA, subB} {
		if ev := sub.next(); ev.ID != "1" {
			t.Fatalf("before the outage: %+v, want id 1", ev)
		}
	}

	rs.Kill()
	req, _ := http.NewRequest(http.MethodPost, a.url("outage"), strings.NewReader(body(2)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if msg := jsonError(t, string(answer)); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
		!strings.HasPrefix(msg, "the relay's Redis does not answer, so the delivery was not stored nor relayed: retry in a moment (storing the delivery in Redis at "+rs.URL()+": redis is unreachable: dial tcp ") {
		t.Errorf("POST while Redis is down = %d (Retry-After %q) %s, want 503 saying Redis is unreachable", resp.StatusCode, resp.Header.Get("Retry-After"), answer)
	}
	if code, doc := b.health(t); code != http.StatusServiceUnavailable || doc["status"] != "redis unreachable" || !strings.Contains(fmt.Sprint(doc["error"]), rs.Addr()) {
		t.Errorf("/healthz while Redis is down = %d %v, want 503 redis unreachable naming %s", code, doc, rs.Addr())
	}
	req, _ = http.NewRequest(http.MethodGet, b.url("outage"), nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", "1")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Error(err)
	} else {
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(answer), "the relay's Redis does not answer: reconnect in a moment with the same Last-Event-ID, nothing will be lost (") || resp.Header.Get("Retry-After") != "5" {
			t.Errorf("a new stream while Redis is down = %d %s, want 503", resp.StatusCode, answer)
		}
	}
	// The open streams are still there: they get pings.
	for name, sub := range map[string]*stream{"A": subA, "B": subB} {
		if !waitPing(sub) {
			t.Errorf("replica %s: the stream ended or got no ping while Redis was down (%v)", name, sub.err)
		}
	}

	rs.Restart()
	for name, r := range map[string]*replica{"A": a, "B": b} {
		waitFor(t, "replica "+name+" healthy again", func() bool {
			code, _ := r.health(t)
			return code == http.StatusOK
		})
	}
	// POSTs work again (retried with a key, as a sender would: the pool
	// may still hold a broken connection for a moment).
	waitFor(t, "a POST to B accepted", func() bool {
		code, _ := post(t, b.url("outage"), body(2), "Content-Type", "application/json", "Idempotency-Key", "after-2")
		return code == http.StatusOK
	})
	if id := postID(t, a.url("outage"), body(3)); id != 3 {
		t.Errorf("POST to A after the outage: id %d, want 3", id)
	}
	for name, sub := range map[string]*stream{"A": subA, "B": subB} {
		for i := 2; i <= 3; i++ {
			if ev := sub.next(); ev.ID != strconv.Itoa(i) || !strings.Contains(ev.Data, body(i)) {
				t.Errorf("replica %s after the outage: %+v, want id %d", name, ev, i)
			}
		}
	}
}

// waitPing reports whether the stream gets a ping (it is still open).
func waitPing(s *stream) bool {
	timeout := time.After(wait)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return false
			}
			if ev.Event == "ping" {
				return true
			}
		case <-timeout:
			return false
		}
	}
}

// redisLogs records what go-redis logs process-wide.
type redisLogs struct {
	mu    sync.Mutex
	lines []string
}

func (l *redisLogs) Printf(_ context.Context, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, v...))
}

func (l *redisLogs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// Opening a relay leaves go-redis's process-wide logger as the program set
// it: the relay is a library, the program decides where go-redis logs.
func TestRedisKeepsTheProgramsLogger(t *testing.T) {
	rs := redistest.Start(t)
	addr := rs.Addr()
	rs.Kill()
	logs := &redisLogs{}
	redis.SetLogger(logs)
	if srv, err := relay.New(relay.Options{Store: redisstore.Opener("redis://"+addr, redisstore.Options{})}); err == nil {
		srv.CloseStorage()
		t.Fatal("New succeeded with Redis down")
	}
	if !strings.Contains(logs.String(), "failed to dial") {
		t.Errorf("the program's go-redis logger got %q; want go-redis's own dial failure", logs.String())
	}
}

// redisstore.SetLogger, the program's choice, sends go-redis's own lines to the
// relay's log at debug level.
func TestRedisSetLogger(t *testing.T) {
	rs := redistest.Start(t)
	addr := rs.Addr()
	rs.Kill()
	var logs relaytest.Buffer
	redisstore.SetLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { redis.SetLogger(&redisLogs{}) })
	if srv, err := relay.New(relay.Options{Store: redisstore.Opener("redis://"+addr, redisstore.Options{})}); err == nil {
		srv.CloseStorage()
		t.Fatal("New succeeded with Redis down")
	}
	if out := logs.String(); !strings.Contains(out, `level=DEBUG msg="redis: `) || !strings.Contains(out, "failed to dial") {
		t.Errorf("the relay's log got %q; want go-redis's dial failure at debug", out)
	}
}

func TestRedisOpenErrors(t *testing.T) {
	rs := redistest.Start(t)
	addr := rs.Addr()
	rs.Kill()
	tests := []struct {
		name string
		opts relay.Options
		is   error
		want string
	}{
		{"unreachable", relay.Options{Store: redisstore.Opener("redis://"+addr, redisstore.Options{})}, relay.ErrStoreUnavailable, "connecting to Redis at redis://" + addr},
		{"password redacted", relay.Options{Store: redisstore.Opener("redis://user:s3cret@"+addr, redisstore.Options{})}, relay.ErrStoreUnavailable, "redis://user:xxxxx@" + addr},
		{"bad scheme", relay.Options{Store: redisstore.Opener("http://"+addr, redisstore.Options{})}, nil, "is not valid (redis: invalid URL scheme: http); write it as redis://"},
		{"with a data dir", relay.Options{Store: redisstore.Opener("redis://"+addr, redisstore.Options{}), DataDir: t.TempDir()}, nil, "exclude each other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := relay.New(tt.opts)
			if err == nil {
				srv.CloseStorage()
				t.Fatal("Open succeeded")
			}
			if tt.is != nil && !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("Open = %v, want %v and %q", err, tt.is, tt.want)
			}
		})
	}
}

// Deliveries are stored byte for byte in Redis: a stream on another
// replica gets the exact body (bodyB), CRLF and invalid UTF-8 included,
// live and on replay.
func TestRedisByteExact(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	a := newReplica(t, rs.URL(), relay.Options{})
	b := newReplica(t, rs.URL(), relay.Options{})
	sub := subscribe(t, b.url("exact")+"?hookline=1")
	sub.ready()
	raw := "{\"a\":1,\r\n\"bin\":\"\xff\xfe\"}"
	big := `{"pad":"` + strings.Repeat("z", 100<<10) + `"}` // over the inline limit: read from the stream
	var live []event
	for _, b := range []string{raw, big} {
		postID(t, a.url("exact"), b)
		live = append(live, sub.next())
	}
	replay := subscribe(t, b.url("exact")+"?hookline=1", "Last-Event-ID", "0")
	replay.ready()
	for i, want := range []string{raw, big} {
		got := replay.next()
		if got != live[i] {
			t.Errorf("delivery %d: replayed event differs from the live one", i+1)
		}
		exact, err := bodyOf(t, b.url("exact"), got)
		if err != nil || !bytes.Equal(exact, []byte(want)) {
			t.Errorf("delivery %d: body %d bytes (%v), want the %d bytes sent", i+1, len(exact), err, len(want))
		}
	}
	if ids := []string{live[0].ID, live[1].ID}; !slices.Equal(ids, []string{"1", "2"}) {
		t.Errorf("ids %v, want [1 2]", ids)
	}
}

// Redis stops answering (SIGSTOP: connections stay open, as in a network
// partition). A POST with an Idempotency-Key times out looking the key up
// and gets 503 "not stored"; a POST without one times out after sending
// the append and gets 503 "may or may not have been stored" (Redis runs it
// when it wakes up: the message is right to hedge); /healthz answers 503.
// Once Redis answers again, the keyed retry is accepted, and the
// subscriber gets every stored delivery once, ids in order.
func TestRedisUnresponsive(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	a := newReplica(t, rs.URL(), relay.Options{})
	b := newReplica(t, rs.URL(), relay.Options{})
	sub := subscribe(t, b.url("partition"))
	sub.ready()
	postID(t, a.url("partition"), body(1))
	if ev := sub.next(); ev.ID != "1" {
		t.Fatalf("before: %+v, want id 1", ev)
	}

	rs.Pause()
	keyed := make(chan string, 1)
	go func() { // at the same time, not to wait twice for the timeout
		code, resp := post(t, a.url("partition"), body(2), "Content-Type", "application/json", "Idempotency-Key", "two")
		keyed <- fmt.Sprint(code, " ", resp)
	}()
	code, resp := post(t, b.url("partition"), body(3), "Content-Type", "application/json")
	if msg := jsonError(t, resp); code != http.StatusServiceUnavailable || !strings.HasPrefix(msg, "the connection to the relay's Redis broke while storing the delivery, which may or may not have been stored and relayed: retry in a moment, with the same Idempotency-Key header if it has one (storing the delivery in Redis at ") {
		t.Errorf("POST without a key while Redis does not answer = %d %s", code, resp)
	}
	if got := <-keyed; !strings.HasPrefix(got, "503 ") || !strings.Contains(got, "the relay's Redis does not answer, so the delivery was not stored nor relayed: retry in a moment (reading an Idempotency-Key from Redis at ") {
		t.Errorf("POST with a key while Redis does not answer = %s", got)
	}
	if code, doc := a.health(t); code != http.StatusServiceUnavailable || doc["status"] != "redis unreachable" {
		t.Errorf("/healthz while Redis does not answer = %d %v", code, doc)
	}
	rs.Resume()

	waitFor(t, "the keyed retry accepted", func() bool {
		code, _ := post(t, a.url("partition"), body(2), "Content-Type", "application/json", "Idempotency-Key", "two")
		return code == http.StatusOK
	})
	postID(t, a.url("partition"), body(4))
	var seqs []string
	for id := 2; ; id++ {
		ev := sub.next()
		if ev.ID != strconv.Itoa(id) {
			t.Fatalf("after the partition: id %s, want %d", ev.ID, id)
		}
		var m struct{ Body struct{ Seq int } }
		json.Unmarshal([]byte(ev.Data), &m)
		seqs = append(seqs, strconv.Itoa(m.Body.Seq))
		if m.Body.Seq == 4 {
			break
		}
	}
	if got := strings.Join(seqs, " "); got != "3 2 4" && got != "2 4" {
		t.Errorf("deliveries after the partition (seq) = %s; want 3 2 4 (the unkeyed POST stored after all) or 2 4", got)
	}
	t.Logf("deliveries after the partition (seq): %v", seqs)
}

// Item: health tells the truth. A Redis without persistence that restarts
// loses the history: a client that resumes afterwards is told its missing
// deliveries were "lost" (not "expired" by the limits, nor "unknown"), and
// the relay logs it as an error.
func TestRedisDataLossIsReportedAsLost(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t, "--appendonly", "no")
	var log relaytest.Buffer
	a := newReplica(t, rs.URL(), relay.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	for i := 1; i <= 3; i++ {
		postID(t, a.url("amnesia"), body(i))
	}
	rs.Kill()
	rs.Restart() // empty: no AOF, no snapshot
	waitFor(t, "a POST accepted after the restart", func() bool {
		code, _ := post(t, a.url("amnesia"), body(4), "Content-Type", "application/json", "Idempotency-Key", "after")
		return code == http.StatusOK
	})
	sub := subscribe(t, a.url("amnesia"), "Last-Event-ID", "3")
	sub.ready()
	ev := sub.next()
	if ev.Event != "hookline-gap" || !strings.Contains(ev.Data, `"reason":"lost"`) {
		t.Errorf("first event after Redis lost its data = %+v, want a gap with reason lost", ev)
	}
	if _, doc := a.health(t); doc["redisLostData"] == nil {
		t.Errorf("/healthz does not say when Redis lost its data: %v", doc)
	}
	if !strings.Contains(log.String(), "level=ERROR msg=\"Redis lost its data") {
		t.Errorf("the loss is not logged as an error:\n%s", log.String())
	}
}

// Item: one channel does not make another wait. Redis is frozen (SIGSTOP)
// for 2 s while a POST to channel a is in flight: the streams of both
// channels on another replica stay alive (pings), and once Redis is back
// both channels' deliveries arrive, each once, without a reconnection.
func TestRedisFrozenChannelsGoOn(t *testing.T) {
	if testing.Short() {
		t.Skip("freezes Redis for 2 s; run without -short")
	}
	t.Parallel()
	rs := redistest.Start(t)
	opts := relay.Options{PingInterval: 50 * time.Millisecond}
	x := newReplica(t, rs.URL(), opts)
	y := newReplica(t, rs.URL(), opts)
	subA := subscribe(t, y.url("frozen-a"))
	subA.ready()
	subB := subscribe(t, y.url("frozen-b"))
	subB.ready()
	postID(t, x.url("frozen-b"), body(1))
	if ev := subB.next(); ev.ID != "1" {
		t.Fatalf("before the freeze: %+v", ev)
	}
	rs.Pause()
	posted := make(chan int64, 1)
	go func() { posted <- postID(t, x.url("frozen-a"), body(1)) }()
	for name, sub := range map[string]*stream{"a": subA, "b": subB} {
		if !waitPing(sub) {
			t.Errorf("channel %s: the stream ended or got no ping while Redis was frozen (%v)", name, sub.err)
		}
	}
	time.Sleep(2 * time.Second) // the freeze: Redis's time, not a timing assertion
	rs.Resume()
	if id := <-posted; id != 1 {
		t.Errorf("the POST in flight during the freeze got id %d, want 1", id)
	}
	postID(t, x.url("frozen-b"), body(2))
	if ev := subA.next(); ev.ID != "1" || !strings.Contains(ev.Data, body(1)) {
		t.Errorf("channel a after the freeze: %+v, want id 1", ev)
	}
	if ev := subB.next(); ev.ID != "2" || !strings.Contains(ev.Data, body(2)) {
		t.Errorf("channel b after the freeze: %+v, want id 2", ev)
	}
}

// A redelivery stored as a reference in Redis reaches another replica's
// stream whole, with its body and new id, even when its own append pushed
// the original out of the history (which is then held for it).
func TestRedisRedeliveryReferenceAcrossReplicas(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	opts := relay.Options{HistoryBytes: 3 << 20} // one 2 MiB delivery at a time
	a := newReplica(t, rs.URL(), opts)
	b := newReplica(t, rs.URL(), opts)
	sub := subscribe(t, b.url("refs"), wire.StreamHeader, "1")
	sub.ready()
	big := `{"a":"` + strings.Repeat("x", 2<<20) + `"}`
	// Each delivery is read before the next is made: Redis keeps one 2 MiB
	// delivery (HistoryBytes), and redeliveries made in a row on replica a
	// can trim the history before a loaded replica b has caught up from it,
	// when b rightly cuts its subscriber off ("deliveries left the history
	// before this relay could relay them").
	read := func(id int) {
		t.Helper()
		ev := sub.next()
		body, err := bodyOf(t, b.url("refs"), ev)
		if ev.ID != strconv.Itoa(id) || err != nil || string(body) != big {
			t.Fatalf("event %s: %d bytes of body (%v), want id %d with the whole delivery", ev.ID, len(body), err, id)
		}
	}
	postID(t, a.url("refs"), big)
	read(1)
	for id := 1; id <= 3; id++ { // chained: each redelivers the last
		code, resp := post(t, fmt.Sprintf("%s/redeliver/%d", a.url("refs"), id), "")
		if code != http.StatusOK {
			t.Fatalf("redeliver %d: %d %s", id, code, resp)
		}
		read(id + 1)
	}
}
