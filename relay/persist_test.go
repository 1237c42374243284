package relay_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hookline/hookline/relay"
)

// openRelay starts a relay with a history in dir on an httptest server;
// stop closes the server and the history (as Serve does).
func openRelay(t *testing.T, opts relay.Options, dir string) (srv *relay.Server, ts *httptest.Server, stop func()) {
	t.Helper()
	opts.DataDir = dir
	srv, err := relay.New(opts)
	if err != nil {
		t.Fatalf("Open(%s) = %v", dir, err)
	}
	ts = httptest.NewServer(srv)
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			srv.Close()
			ts.Close()
			if err := srv.CloseStorage(); err != nil {
				t.Errorf("CloseStorage = %v", err)
			}
		}
	}
	t.Cleanup(stop)
	return srv, ts, stop
}

// A relay restarted on the same data directory replays after a
// Last-Event-ID from before the restart, with the same ids and the same
// messages, and goes on numbering from the last stored id.
func TestHistorySurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	_, ts, stop := openRelay(t, relay.Options{}, dir)
	url := ts.URL + "/keep"
	sub := subscribe(t, url+"?hookline=1", "Last-Event-ID", "0")
	sub.ready()
	var before []event
	for i := 1; i <= 4; i++ {
		mustPost(t, url+"?n="+fmt.Sprint(i), fmt.Sprintf("{\"n\":%d,\r\n\"bin\":\"\xff\"}", i), "Content-Type", "application/json", "X-GitHub-Event", "push")
		before = append(before, sub.next())
	}
	sub.close()
	stop()

	srv, ts2, _ := openRelay(t, relay.Options{}, dir)
	if st := srv.Stats(); st.Retained != 4 || st.Channels != 1 || !st.Persistent {
		t.Errorf("Stats after restart = %+v, want 4 retained in 1 channel, persistent", st)
	}
	url = ts2.URL + "/keep"
	sub = subscribe(t, url+"?hookline=1", "Last-Event-ID", "2")
	sub.ready()
	for _, want := range before[2:] {
		if got := sub.next(); got != want {
			t.Errorf("replayed after restart:\n%+v\nwant\n%+v", got, want)
		}
	}
	mustPost(t, url, `{"n":5}`, "Content-Type", "application/json")
	if ev := sub.next(); ev.ID != "5" {
		t.Errorf("first id after restart = %q, want 5", ev.ID)
	}
	// Redelivery of a delivery from before the restart.
	code, body := post(t, url+"/redeliver/1", "")
	if code != http.StatusOK || !strings.Contains(body, `"id":6`) {
		t.Errorf("redeliver 1 after restart = %d %s", code, body)
	}
	const mark = `,"x-hookline-redelivery-of":"1"`
	if ev := sub.next(); ev.ID != "6" || !strings.Contains(ev.Data, mark) || strings.Replace(normalize(ev.Data), mark, "", 1) != normalize(before[0].Data) {
		t.Errorf("redelivery = %+v, want delivery 1's message marked as its redelivery", ev)
	}
}

// Channel names never reach the file system: the data directory holds only
// the data file, whatever the names.
func TestDataDirHoldsOnlyTheDataFile(t *testing.T) {
	dir := t.TempDir()
	_, ts, stop := openRelay(t, relay.Options{}, dir)
	for _, name := range []string{"CON", "aux", "relay", "-", "_", strings.Repeat("a", 128)} {
		mustPost(t, ts.URL+"/"+name, "x")
	}
	stop()
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{relay.DataFile}) {
		t.Errorf("data directory holds %v, want only %s", names, relay.DataFile)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	openRelay(t, relay.Options{}, dir)
	if _, err := relay.New(relay.Options{DataDir: dir}); !errors.Is(err, relay.ErrDataDirInUse) {
		t.Errorf("Open on a directory in use = %v, want ErrDataDirInUse", err)
	}
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, relay.DataFile), []byte(strings.Repeat("not bolt", 1000)), 0o600)
	if _, err := relay.New(relay.Options{DataDir: bad}); !errors.Is(err, relay.ErrDataDirDamaged) {
		t.Errorf("Open on a damaged file = %v, want ErrDataDirDamaged", err)
	}
}

// Once the history is closed, a POST is refused with 503 and Retry-After
// (it was not stored, so the sender must retry), never answered 200.
func TestPostAfterStorageClosed(t *testing.T) {
	srv, ts, _ := openRelay(t, relay.Options{}, t.TempDir())
	mustPost(t, ts.URL+"/c", "one")
	srv.CloseStorage()
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/c", strings.NewReader("two"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("POST after CloseStorage = %d (Retry-After %q), want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	req, _ = http.NewRequest(http.MethodGet, ts.URL+"/c", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", "0")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("stream after CloseStorage = %d, want 503", resp.StatusCode)
	}
}

// A POST retried with the same Idempotency-Key and body (its first answer
// was lost) is answered with the first delivery's id and not relayed
// again, also after a restart; the same key with another body is refused.
func TestIdempotencyKey(t *testing.T) {
	for _, persistent := range []bool{false, true} {
		t.Run(fmt.Sprint("persistent=", persistent), func(t *testing.T) {
			dir := t.TempDir()
			var ts *httptest.Server
			var stop func()
			if persistent {
				_, ts, stop = openRelay(t, relay.Options{}, dir)
			} else {
				_, ts = newRelay(t, relay.Options{})
			}
			url := ts.URL + "/idem"
			sub := subscribe(t, url)
			sub.ready()
			mustPost(t, url, "first", "Idempotency-Key", "k-1")
			code, body := post(t, url, "first", "Idempotency-Key", "k-1")
			if code != http.StatusOK || body != "{\"duplicate\":true,\"id\":1}\n" {
				t.Errorf("retry = %d %q, want 200 naming id 1 as a duplicate", code, body)
			}
			code, body = post(t, url, "other body", "Idempotency-Key", "k-1")
			if code != http.StatusUnprocessableEntity || !strings.Contains(jsonError(t, body), "already used for delivery 1") {
				t.Errorf("same key, other body = %d %s; want 422", code, body)
			}
			mustPost(t, url, "second", "Idempotency-Key", "k-2")
			mustPost(t, url, "third")
			for _, want := range []string{"1", "2", "3"} {
				if ev := sub.next(); ev.ID != want {
					t.Errorf("event %+v, want id %s (duplicates are not relayed)", ev, want)
				}
			}
			if !persistent {
				return
			}
			sub.close()
			stop()
			_, ts, _ = openRelay(t, relay.Options{}, dir)
			if code, body := post(t, ts.URL+"/idem", "second", "Idempotency-Key", "k-2"); code != http.StatusOK || !strings.Contains(body, `"id":2`) {
				t.Errorf("retry after restart = %d %s, want 200 naming id 2", code, body)
			}
		})
	}
}

// BenchmarkPost measures POST /<channel> of 4 KiB JSON, answered, with the
// history in memory and in a bbolt file (one fsynced transaction per POST),
// from one sender and from parallel senders. Run it with:
//
//	go test -run '^$' -bench 'BenchmarkPost' -benchtime 2s ./relay/
func BenchmarkPost(b *testing.B) {
	body := `{"action":"opened","pad":"` + strings.Repeat("x", 4096-len(`{"action":"opened","pad":""}`)) + `"}`
	for _, kind := range []string{"memory", "bolt"} {
		for _, parallel := range []bool{false, true} {
			name := kind + "/sequential"
			if parallel {
				name = kind + "/parallel"
			}
			b.Run(name, func(b *testing.B) {
				opts := relay.Options{}
				if kind == "bolt" {
					opts.DataDir = b.TempDir()
				}
				srv, err := relay.New(opts)
				if err != nil {
					b.Fatal(err)
				}
				ts := httptest.NewServer(srv)
				defer func() { ts.Close(); srv.CloseStorage() }()
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
				send := func(url string) {
					resp, err := client.Post(url, "application/json", strings.NewReader(body))
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Fatalf("POST = %d", resp.StatusCode)
					}
				}
				b.SetBytes(int64(len(body)))
				b.ResetTimer()
				if !parallel {
					for b.Loop() {
						send(ts.URL + "/bench")
					}
				} else {
					var n atomic.Int64
					b.RunParallel(func(pb *testing.PB) {
						url := fmt.Sprintf("%s/bench%d", ts.URL, n.Add(1)) // a channel per sender
						for pb.Next() {
							send(url)
						}
					})
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "POST/s")
			})
		}
	}
}

// A redelivery is stored as a reference to the delivery it repeats; read
// back after a restart, it still carries the relay's mark.
func TestRedeliveryMarkSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	_, ts, stop := openRelay(t, relay.Options{}, dir)
	mustPost(t, ts.URL+"/marks", `{"a":1}`, "Content-Type", "application/json", "X-GitHub-Delivery", "d-1")
	if code, answer := post(t, ts.URL+"/marks/redeliver/1", ""); code != http.StatusOK {
		t.Fatalf("redeliver = %d %s", code, answer)
	}
	stop()
	_, ts2, _ := openRelay(t, relay.Options{}, dir)
	sub := subscribe(t, ts2.URL+"/marks?hookline=1", "Last-Event-ID", "0")
	sub.ready()
	if m := message(t, sub.next()); m["x-hookline-redelivery-of"] != nil {
		t.Errorf("the delivery carries x-hookline-redelivery-of %v", m["x-hookline-redelivery-of"])
	}
	if m := message(t, sub.next()); m["x-hookline-redelivery-of"] != "1" || m["x-github-delivery"] != "d-1" {
		t.Errorf("the redelivery read back: x-hookline-redelivery-of %v, x-github-delivery %v; want 1, d-1", m["x-hookline-redelivery-of"], m["x-github-delivery"])
	}
}
