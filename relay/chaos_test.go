package relay_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookline/hookline/internal/testutil/redistest"
	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/relay"
	"github.com/hookline/hookline/relay/redisstore"
	"github.com/hookline/hookline/webhooks"
)

// chaosForward is one hookline forward (the proxy package's Client, what
// `hookline forward` runs) on the channel, through a load balancer of its
// own that sends each request to its relay replica while that one lives,
// else to the next live one; its target records what it got, in order.
type chaosForward struct {
	mu     sync.Mutex
	got    []string      // the bodies the target got, in order
	seen   map[int]int   // seq -> times the target got it
	notify chan struct{} // capacity 1: the target got one
}

func startChaosForward(ctx context.Context, t *testing.T, relays []*replica, alive func(int) bool, own int, channel, secret string) *chaosForward {
	f := &chaosForward{seen: map[int]int{}, notify: make(chan struct{}, 1)}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m struct{ Seq int }
		json.Unmarshal(b, &m)
		f.mu.Lock()
		f.got = append(f.got, string(b))
		f.seen[m.Seq]++
		f.mu.Unlock()
		select {
		case f.notify <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(target.Close)
	lb := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			at := own
			for !alive(at) {
				at = (at + 1) % len(relays)
			}
			u, _ := url.Parse(relays[at].ts.URL)
			r.SetURL(u)
		},
		FlushInterval: -1, // a stream's events as they come
		ErrorLog:      log.New(io.Discard, "", 0),
	})
	t.Cleanup(lb.Close)
	client, err := proxy.New(proxy.Options{
		URL: lb.URL + "/" + channel, Secret: secret, Targets: []proxy.Target{{URL: target.URL}},
		LastEventID: "0", MaxBackoff: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	go client.Run(ctx)
	return f
}

// chaosBody is delivery seq's body: its number and bytes of its own.
func chaosBody(seq int) string {
	return fmt.Sprintf(`{"seq":%d,"pad":"%s"}`, seq, rand.Text())
}

// TestChaosSentinelFailover: a relay tier on Redis Sentinel (a primary,
// two replicas, three Sentinels, real redis-server processes) and three
// relay replicas, one hookline forward on each (through a load balancer
// that moves it to a live replica), a sender POSTing signed deliveries at
// a steady rate, retrying with the same Idempotency-Key what is not
// answered 2xx. The Redis primary is killed (SIGKILL) mid-run, later a
// relay replica. Every delivery answered 2xx reaches every forward's
// target exactly as posted, in order, once; the non-2xx answers are
// counted and their time around the failover logged.
func TestChaosSentinelFailover(t *testing.T) {
	primary := redistest.Start(t)
	primary.StartReplica(t)
	primary.StartReplica(t)
	var sentinels []*redistest.Server
	for range 3 {
		sentinels = append(sentinels, redistest.StartSentinel(t, "hl", primary, 2))
	}
	for _, s := range sentinels {
		// A Sentinel publishes what it finds: wait for its news until it
		// knows the two replicas and the two other Sentinels.
		rc := redis.NewClient(&redis.Options{Addr: s.Addr()})
		news := rc.Subscribe(t.Context(), "+sentinel", "+slave")
		news.Receive(t.Context()) // subscribed: no news is missed from here
		timeout := time.After(30 * time.Second)
		for !strings.Contains(s.Info(t, "sentinel"), "slaves=2,sentinels=3") {
			select {
			case <-news.Channel():
			case <-timeout:
				t.Fatalf("the Sentinels do not know each other and the replicas after 30 s:\n%s", s.Info(t, "sentinel"))
			}
		}
		news.Close()
		rc.Close()
	}
	url := fmt.Sprintf("redis://%s?master_name=hl&addr=%s&addr=%s", sentinels[0].Addr(), sentinels[1].Addr(), sentinels[2].Addr())
	testChaos(t, url, primary.Kill)
}

// TestChaosClusterFailover is TestChaosSentinelFailover on a Redis Cluster
// of three primaries, each with a replica: the primary of the channel's
// shard is killed, and its replica takes over. The new primary has no
// replica then, and each append waits for one (the default: one when Redis
// has replicas), so POSTs to that shard are answered 503 until the killed
// machine is replaced: it is started again, as an orchestrator would, once
// the failover is done, and joins as the new primary's replica.
func TestChaosClusterFailover(t *testing.T) {
	c := redistest.StartCluster(t, 3, 1)
	const key = "hookline:{chaos}:m"
	testChaos(t, c.URL(), func() {
		dead := c.PrimaryOf(key)
		dead.Kill()
		go func() {
			// The cluster tells no one when its failover is done: look
			// again until it is (else the acks stay 503 and the test says so).
			if testenv.Polled(50*time.Millisecond, func() bool { return c.PrimaryOf(key) != nil }) {
				dead.Restart()
			}
		}()
	})
}

// testChaos runs the chaos test on the Redis of url: killRedis kills the
// primary that holds the channel.
func testChaos(t *testing.T, url string, killRedis func()) {
	const total, killRedisAt, killRelayAt = 400, 100, 250
	relays := make([]*replica, 3)
	for i := range relays {
		relays[i] = newReplicaWith(t, url, redisstore.Options{AckTimeout: 5 * time.Second}, relay.Options{})
		if st := relays[i].srv.Stats(); st.AckReplicas != 1 {
			t.Fatalf("relay %d waits for %d replicas, want 1", i, st.AckReplicas)
		}
	}
	var killedMu sync.Mutex
	killed := map[int]bool{}
	alive := func(i int) bool {
		killedMu.Lock()
		defer killedMu.Unlock()
		return !killed[i]
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	const secret = "chaos secret"
	forwards := make([]*chaosForward, 3)
	for i := range forwards {
		forwards[i] = startChaosForward(ctx, t, relays, alive, i, "chaos", secret)
	}

	client := &http.Client{Timeout: 10 * time.Second}
	bodies := map[int]string{}
	acked := map[int]int64{}
	var refused int
	var firstRefused, lastRefused, killedAt, backAt time.Time
	tick := time.NewTicker(5 * time.Millisecond) // the sender's steady rate: 200 a second
	defer tick.Stop()
	for seq, at := 1, 0; seq <= total; seq++ {
		bodies[seq] = chaosBody(seq)
		sig, _ := webhooks.Sign(secret, []byte(bodies[seq]))
		for {
			<-tick.C
			if ctx.Err() != nil {
				t.Fatalf("delivery %d not acknowledged in time (%d refusals so far)", seq, refused)
			}
			for !alive(at) {
				at = (at + 1) % len(relays)
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, relays[at].url("chaos"), strings.NewReader(bodies[seq]))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Hub-Signature-256", sig)
			req.Header.Set("Idempotency-Key", "seq-"+strconv.Itoa(seq))
			req.Header.Set("X-GitHub-Event", "ping")
			req.Header.Set("X-GitHub-Delivery", "chaos-"+strconv.Itoa(seq))
			at = (at + 1) % len(relays)
			resp, err := client.Do(req)
			if err == nil {
				var a struct{ ID int64 }
				json.NewDecoder(resp.Body).Decode(&a)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					acked[seq] = a.ID
					if !killedAt.IsZero() && backAt.IsZero() {
						backAt = time.Now()
					}
					break
				}
			}
			refused++
			if firstRefused.IsZero() {
				firstRefused = time.Now()
			}
			lastRefused = time.Now()
		}
		switch len(acked) {
		case killRedisAt:
			killRedis()
			killedAt = time.Now()
		case killRelayAt:
			killedMu.Lock()
			killed[1] = true
			killedMu.Unlock()
			relays[1].kill()
		}
	}

	// Every forward's target gets every acknowledged delivery.
	for i, f := range forwards {
		for {
			f.mu.Lock()
			n := 0
			for seq := range acked {
				if f.seen[seq] > 0 {
					n++
				}
			}
			f.mu.Unlock()
			if n == len(acked) {
				break
			}
			select {
			case <-f.notify:
			case <-ctx.Done():
				t.Fatalf("forward %d's target has %d of the %d acknowledged deliveries", i, n, len(acked))
			}
		}
	}
	cancel()
	for i, f := range forwards {
		f.mu.Lock()
		repeats, last := 0, 0
		for _, b := range f.got {
			var m struct{ Seq int }
			json.Unmarshal([]byte(b), &m)
			if b != bodies[m.Seq] {
				t.Errorf("forward %d: the target got %q, want %q (byte-exact)", i, b, bodies[m.Seq])
			}
			if m.Seq <= last {
				if f.seen[m.Seq] > 1 {
					repeats++
				} else {
					t.Errorf("forward %d: delivery %d after %d: out of order", i, m.Seq, last)
				}
			}
			last = max(last, m.Seq)
		}
		if repeats > 0 {
			t.Errorf("forward %d's target got %d deliveries twice (the sender retried each with its Idempotency-Key)", i, repeats)
		}
		t.Logf("forward %d: its target got %d deliveries, %d repeats", i, len(f.got), repeats)
		f.mu.Unlock()
	}
	window := lastRefused.Sub(firstRefused)
	t.Logf("%d acknowledged; %d non-2xx answers from %s to %s after the primary's kill (%s; a negative time is before it); first 2xx after the kill %s later",
		len(acked), refused, firstRefused.Sub(killedAt).Round(time.Millisecond), lastRefused.Sub(killedAt).Round(time.Millisecond), window.Round(time.Millisecond), backAt.Sub(killedAt).Round(time.Millisecond))
	if window > time.Minute { // a hang guard, not a speed: the Sentinels give a failover 10 s
		t.Errorf("non-2xx answers for %s: the failover took too long", window)
	}
}
