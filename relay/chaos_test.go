package relay_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/redistest"
	"github.com/hookline/hookline/relay"
	"github.com/hookline/hookline/relay/redisstore"
	"github.com/hookline/hookline/webhooks"
)

// chaosSubscriber reads one channel as a forward does, starting on one
// relay replica and moving to the next live one (what a load balancer
// does) with Last-Event-ID when its stream ends.
type chaosSubscriber struct {
	mu   sync.Mutex
	got  []chaosEvent
	seen map[int]int // seq -> times received
}

type chaosEvent struct {
	id   int64
	seq  int
	body string
}

func (c *chaosSubscriber) run(ctx context.Context, t *testing.T, relays []*replica, alive func(int) bool, start int, channel string) {
	last, at := "0", start
	for ctx.Err() == nil {
		for !alive(at) {
			at = (at + 1) % len(relays)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, relays[at].url(channel), nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Last-Event-ID", last)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			if err == nil {
				resp.Body.Close()
			}
			at = (at + 1) % len(relays)
			select { // a relay that refuses (Redis failing over): the next one, in a moment
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		st := &stream{t: t, resp: resp, events: make(chan event, 4096)}
		go st.read()
		for ev := range st.events {
			if ev.ID == "" || ev.Event != "" {
				continue // the ready event, pings, gaps (which the checks below would show as missing)
			}
			var m struct {
				Body json.RawMessage `json:"body"`
			}
			json.Unmarshal([]byte(ev.Data), &m)
			var b struct{ Seq int }
			json.Unmarshal(m.Body, &b)
			id, _ := strconv.ParseInt(ev.ID, 10, 64)
			c.mu.Lock()
			c.got = append(c.got, chaosEvent{id: id, seq: b.Seq, body: string(m.Body)})
			c.seen[b.Seq]++
			c.mu.Unlock()
			last = ev.ID
		}
		resp.Body.Close()
	}
}

// chaosBody is delivery seq's body: its number and bytes of its own.
func chaosBody(seq int) string {
	return fmt.Sprintf(`{"seq":%d,"pad":"%s"}`, seq, rand.Text())
}

// TestChaosSentinelFailover: a relay tier on Redis Sentinel (a primary,
// two replicas, three Sentinels, real redis-server processes) and three
// relay replicas, one subscriber on each, a sender POSTing signed
// deliveries at a steady rate, retrying with the same Idempotency-Key
// what is not answered 2xx. The Redis primary is killed (SIGKILL) mid-run,
// later a relay replica. Every delivery answered 2xx reaches every
// subscriber exactly as posted, in id order; the non-2xx answers come
// only around the failover.
func TestChaosSentinelFailover(t *testing.T) {
	const total, killRedisAt, killRelayAt = 400, 100, 250
	primary := redistest.Start(t)
	primary.StartReplica(t)
	primary.StartReplica(t)
	var sentinels []*redistest.Server
	for range 3 {
		sentinels = append(sentinels, redistest.StartSentinel(t, "hl", primary, 2))
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range sentinels {
		for !strings.Contains(s.Info(t, "sentinel"), "slaves=2,sentinels=3") {
			if time.Now().After(deadline) {
				t.Fatalf("the Sentinels do not know each other and the replicas after 30 s:\n%s", s.Info(t, "sentinel"))
			}
			time.Sleep(50 * time.Millisecond) // Sentinels find each other every 2 s: look again
		}
	}
	url := fmt.Sprintf("redis://%s?master_name=hl&addr=%s&addr=%s", sentinels[0].Addr(), sentinels[1].Addr(), sentinels[2].Addr())
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
	subs := make([]*chaosSubscriber, 3)
	var wg sync.WaitGroup
	for i := range subs {
		subs[i] = &chaosSubscriber{seen: map[int]int{}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			subs[i].run(ctx, t, relays, alive, i, "chaos")
		}()
	}

	const secret = "chaos secret"
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
			primary.Kill()
			killedAt = time.Now()
		case killRelayAt:
			killedMu.Lock()
			killed[1] = true
			killedMu.Unlock()
			relays[1].kill()
		}
	}

	// Every subscriber gets every acknowledged delivery.
	for i, s := range subs {
		for {
			s.mu.Lock()
			n := 0
			for seq := range acked {
				if s.seen[seq] > 0 {
					n++
				}
			}
			s.mu.Unlock()
			if n == len(acked) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("subscriber %d has %d of the %d acknowledged deliveries", i, n, len(acked))
			}
			time.Sleep(20 * time.Millisecond) // the subscribers read on their own: look again
		}
	}
	cancel()
	wg.Wait()
	for i, s := range subs {
		repeats := 0
		for j, e := range s.got {
			if j > 0 && e.id <= s.got[j-1].id {
				t.Errorf("subscriber %d: delivery %d after %d: ids out of order", i, e.id, s.got[j-1].id)
			}
			if want, ok := bodies[e.seq]; !ok || e.body != want {
				t.Errorf("subscriber %d: delivery %d is %q, want %q (byte-exact)", i, e.id, e.body, want)
			}
		}
		for seq, n := range s.seen {
			if n > 1 {
				repeats += n - 1
			}
			if id, ok := acked[seq]; ok && n == 0 {
				t.Errorf("subscriber %d lost acknowledged delivery %d (seq %d)", i, id, seq)
			}
		}
		if repeats > 0 {
			t.Errorf("subscriber %d got %d deliveries twice (the sender retried each with its Idempotency-Key)", i, repeats)
		}
		t.Logf("subscriber %d: %d received, %d repeats", i, len(s.got), repeats)
	}
	window := lastRefused.Sub(firstRefused)
	t.Logf("%d acknowledged; %d non-2xx answers from %s to %s after the primary's kill (%s; a negative time is before it); first 2xx after the kill %s later",
		len(acked), refused, firstRefused.Sub(killedAt).Round(time.Millisecond), lastRefused.Sub(killedAt).Round(time.Millisecond), window.Round(time.Millisecond), backAt.Sub(killedAt).Round(time.Millisecond))
	if window > time.Minute { // a hang guard, not a speed: the Sentinels give a failover 10 s
		t.Errorf("non-2xx answers for %s: the failover took too long", window)
	}
}
