package relay_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookline/hookline/internal/testutil/redistest"
	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/relay"
	"github.com/hookline/hookline/relay/redisstore"
)

// newReplicaWith is newReplica with the store's acknowledgement options.
func newReplicaWith(t testing.TB, redisURL string, o redisstore.Options, opts relay.Options) *replica {
	t.Helper()
	opts.Store = redisstore.Opener(redisURL, o)
	srv, err := relay.New(opts)
	if err != nil {
		t.Fatalf("New with Redis at %s = %v", redisURL, err)
	}
	r := &replica{t: t, srv: srv, ts: httptest.NewServer(srv)}
	t.Cleanup(r.kill)
	return r
}

// On a Redis with a replica, a POST is answered 200 only once the replica
// has its delivery (the default: one replica). While the replica does not
// answer, a POST is answered 503 saying why, counted, logged, and its
// delivery is neither relayed nor readable; the next confirmed delivery
// brings it along, in id order.
func TestRedisAcksWaitForAReplica(t *testing.T) {
	t.Parallel()
	primary := redistest.Start(t)
	replica1 := primary.StartReplica(t)
	var logs relaytest.Buffer
	// r waits long enough for a replica on a loaded machine; fast, on the
	// same Redis, gives up soon (the replica paused).
	r := newReplicaWith(t, primary.URL(), redisstore.Options{AckTimeout: time.Minute}, relay.Options{})
	fast := newReplicaWith(t, primary.URL(), redisstore.Options{AckTimeout: 100 * time.Millisecond}, relay.Options{Logger: debugLogger(&logs)})
	if st := r.srv.Stats(); st.AckReplicas != 1 || st.Replicas != 1 {
		t.Fatalf("Stats: ackReplicas %d, replicas %d; want 1 and 1 (the default on a Redis with a replica)", st.AckReplicas, st.Replicas)
	}
	s := subscribe(t, r.url("acks"))
	defer s.close()
	s.ready()

	if id := postID(t, r.url("acks"), body(1)); id != 1 {
		t.Fatalf("first delivery id %d", id)
	}
	if n := replicaLen(t, replica1, "acks"); n != 1 {
		t.Errorf("the replica holds %d deliveries when the POST is answered, want 1 (WAIT)", n)
	}
	if ev := s.next(); ev.ID != "1" {
		t.Fatalf("stream: %+v, want delivery 1", ev)
	}

	replica1.Pause()
	code, answer := post(t, fast.url("acks"), body(2), "Content-Type", "application/json")
	replica1.Resume()
	var e struct{ Error string }
	json.Unmarshal([]byte(answer), &e)
	if code != http.StatusServiceUnavailable || !strings.Contains(e.Error, "has not copied the delivery to enough replicas yet, so it is not safe: it was not relayed") {
		t.Errorf("POST with the replica paused = %d %s; want 503 saying the replicas did not confirm it", code, answer)
	}
	if st := fast.srv.Stats(); st.Unreplicated != 1 {
		t.Errorf("Stats.Unreplicated = %d, want 1", st.Unreplicated)
	}
	if !strings.Contains(logs.String(), "Redis replicas did not confirm a delivery in time") {
		t.Errorf("no log line about the unconfirmed delivery:\n%s", logs.String())
	}
	if id := postID(t, r.url("acks"), body(3)); id != 3 {
		t.Errorf("the delivery after it got id %d, want 3", id)
	}
	for _, want := range []string{"2", "3"} { // 2 now that 3 is confirmed (and with it, every write before it)
		if ev := s.next(); ev.ID != want {
			t.Errorf("stream: %+v, want delivery %s", ev, want)
		}
	}

	// A sender that retries with its Idempotency-Key gets 200 for the
	// delivery once a replica has it, not before.
	replica1.Pause()
	code, answer = post(t, fast.url("acks"), body(4), "Content-Type", "application/json", "Idempotency-Key", "four")
	if code != http.StatusServiceUnavailable {
		t.Errorf("POST with the replica paused = %d %s; want 503", code, answer)
	}
	code, answer = post(t, fast.url("acks"), body(4), "Content-Type", "application/json", "Idempotency-Key", "four")
	if code != http.StatusServiceUnavailable {
		t.Errorf("its retry with the replica still paused = %d %s; want 503, not the held delivery's id", code, answer)
	}
	replica1.Resume()
	if id := postID(t, r.url("acks"), body(4), "Idempotency-Key", "four"); id != 4 {
		t.Errorf("the retry once the replica is back got id %d, want 4 (the held delivery's)", id)
	}
	if ev := s.next(); ev.ID != "4" {
		t.Errorf("stream: %+v, want delivery 4", ev)
	}
	if n := replicaLen(t, replica1, "acks"); n != 4 {
		t.Errorf("the replica holds %d deliveries, want 4", n)
	}
}

// Asking for more replicas than the primary has makes every POST 503 with
// a log line, never a silent 200; MinReplicas NoReplicas never waits.
func TestRedisAcksMoreReplicasThanThereAre(t *testing.T) {
	t.Parallel()
	primary := redistest.Start(t)
	primary.StartReplica(t)
	var logs relaytest.Buffer
	two := newReplicaWith(t, primary.URL(), redisstore.Options{MinReplicas: 2, AckTimeout: 100 * time.Millisecond}, relay.Options{Logger: debugLogger(&logs)})
	if !strings.Contains(logs.String(), "Redis has fewer replicas connected than each acknowledgement waits for") {
		t.Errorf("no warning at start:\n%s", logs.String())
	}
	if code, answer := post(t, two.url("c"), body(1), "Content-Type", "application/json"); code != http.StatusServiceUnavailable || !strings.Contains(answer, "of the 2 replicas it waits for confirmed it") || !strings.Contains(answer, "(1 connected)") {
		t.Errorf("POST = %d %s, want 503 saying too few of 2 replicas confirmed, 1 connected", code, answer)
	}
	none := newReplicaWith(t, primary.URL(), redisstore.Options{MinReplicas: redisstore.NoReplicas}, relay.Options{})
	if st := none.srv.Stats(); st.AckReplicas != 0 || st.Replicas != 1 {
		t.Errorf("NoReplicas: ackReplicas %d, replicas %d; want 0 and 1", st.AckReplicas, st.Replicas)
	}
	postID(t, none.url("c"), body(2))
}

// replicaLen returns how many deliveries of channel the Redis r holds.
func replicaLen(t *testing.T, r *redistest.Server, channel string) int64 {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer c.Close()
	n, err := c.XLen(t.Context(), "hookline:{"+channel+"}:s").Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}
