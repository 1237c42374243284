package relay_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/relaytest"
	"github.com/hookline/hookline/relay"
)

// The attacks of a relay on the open internet, each bounded in time, with
// the figure it is judged by. They take a few seconds each: skipped by
// -short.

// stuckStream opens a stream on channel URL u that never reads, with a
// small receive buffer, and returns once the relay counts it.
func stuckStream(t *testing.T, rl *relaytest.Relay, u string) net.Conn {
	t.Helper()
	before := rl.Server.Stats().Subscribers
	conn, err := net.Dial("tcp", strings.TrimPrefix(rl.Base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	t.Cleanup(func() { conn.Close() })
	path := strings.TrimPrefix(u, rl.Base)
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nX-Hookline-Stream: 1\r\n\r\n", path)
	waitFor(t, "the stream to join", func() bool { return rl.Server.Stats().Subscribers > before })
	return conn
}

// heapInUse returns the live heap after a collection.
func heapInUse() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// rss returns the process's resident memory, or 0 where /proc is missing.
func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var kb int64
		if n, _ := fmt.Sscanf(sc.Text(), "VmRSS: %d kB", &kb); n == 1 {
			return kb << 10
		}
	}
	return 0
}

// memoryFactor is the documented bound (docs/DEPLOY.md): the relay's live
// heap stays within this many times Options.TotalHistoryBytes, plus the
// uploads in flight, whatever the streams do.
const memoryFactor = 2

func checkMemory(t *testing.T, rl *relaytest.Relay, base, total int64) {
	t.Helper()
	grown := heapInUse() - base
	st := rl.Server.Stats()
	t.Logf("live heap grew by %.1f MiB for a total history limit of %.1f MiB (%.2fx; history %.1f MiB, pinned by streams %.1f MiB, %d cut off); RSS %.0f MiB",
		float64(grown)/(1<<20), float64(total)/(1<<20), float64(grown)/float64(total), float64(st.HistoryBytes)/(1<<20), float64(st.PinnedBytes)/(1<<20), st.CutOff, float64(rss())/(1<<20))
	if counted := st.HistoryBytes + st.PinnedBytes; grown > counted+4<<20 {
		t.Errorf("the live heap grew by %d bytes, more than the relay counts (%d): the limits do not bound what they say", grown, counted)
	}
	if grown > memoryFactor*total+4<<20 {
		t.Errorf("the live heap grew by %d bytes, more than %d times the total history limit (%d)", grown, memoryFactor, total)
	}
	if st.HistoryBytes > total || st.PinnedBytes > total+8<<20 {
		t.Errorf("history %d, pinned %d bytes; want each within the limit %d (pinned: plus one delivery)", st.HistoryBytes, st.PinnedBytes, total)
	}
}

// Item: the line-break bomb. JSON bodies made of line breaks, each read by
// two streams that never read: each would become an event seven times its
// size, cached beside the delivery and not counted.
func TestAttackLineBreakBomb(t *testing.T) {
	if testing.Short() {
		t.Skip("a memory attack (a few seconds); run without -short")
	}
	const total = 32 << 20
	rl := relaytest.Start(t, relay.Options{TotalHistoryBytes: total, HistoryBytes: total})
	base := heapInUse()
	for range 2 {
		stuckStream(t, rl, rl.Channel)
	}
	body := "{" + strings.Repeat("\n", 8<<20) + "}"
	for range 6 {
		mustPost(t, rl.Channel, body, "Content-Type", "application/json")
	}
	checkMemory(t, rl, base, total)
}

// Item: memory is what the limits say. Streams on twenty channels never
// read while deliveries evict their channels' histories: what their queues
// pin counts against the total, and those holding the most are cut off.
func TestAttackStreamsThatNeverRead(t *testing.T) {
	if testing.Short() {
		t.Skip("a memory attack (a few seconds); run without -short")
	}
	const total = 16 << 20
	rl := relaytest.Start(t, relay.Options{TotalHistoryBytes: total, HistoryBytes: 4 << 20})
	base := heapInUse()
	var chans []string
	for range 20 {
		u := rl.Base + "/" + rl.Server.NewChannel()
		stuckStream(t, rl, u)
		chans = append(chans, u)
	}
	body := string(relaytest.Body(1, 1<<20))
	for range 5 {
		for _, u := range chans {
			mustPost(t, u, body, "Content-Type", "application/json")
		}
	}
	checkMemory(t, rl, base, total)
	if rl.Server.Stats().CutOff == 0 {
		t.Errorf("no stream was cut off")
	}
}

// Item: a budget for uploads in flight. Senders that announce large bodies
// and trickle them hold the budget; beyond it, POSTs get 503 with
// Retry-After before their bodies are read, while a small delivery (the
// canary) still gets through at once.
func TestAttackUploadFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("a memory attack (a few seconds); run without -short")
	}
	const budget, size = 32 << 20, 8 << 20
	rl := relaytest.Start(t, relay.Options{MaxUploadBytes: budget, MaxBodyBytes: size})
	host := strings.TrimPrefix(rl.Base, "http://")
	refused := 0
	for i := range 20 {
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "POST /%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", rl.Server.NewChannel(), size)
		if i < budget/size {
			waitFor(t, "the upload to be counted", func() bool { return rl.Server.Stats().UploadBytes >= int64(i+1)*size })
			continue
		}
		conn.SetReadDeadline(time.Now().Add(relaytest.HangGuard))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("upload %d: no answer while the budget is full: %v", i+1, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("upload %d beyond the budget: %s, Retry-After %q; want 503 with Retry-After", i+1, resp.Status, resp.Header.Get("Retry-After"))
		}
		refused++
	}
	for i := range 5 {
		start := time.Now()
		mustPost(t, rl.Channel, string(relaytest.Body(i, 4<<10)), "Content-Type", "application/json")
		t.Logf("canary %d answered in %s while the budget is full", i+1, time.Since(start))
	}
	if got := rl.Server.Stats().UploadBytes; got != budget {
		t.Errorf("uploads in flight count %d bytes, want the %d of the four announced", got, budget)
	}
	t.Logf("%d uploads refused beyond a budget of %d MiB", refused, budget>>20)
}
