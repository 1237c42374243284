package relay_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/relaytest"
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

// settledHeap returns the live heap once it has stopped shrinking for a
// second (wait bounds the whole). A stream the relay cuts off is dropped
// from its count at once, and its goroutine lets go of what it was writing
// as it unwinds, moments later: a single reading right after the count
// held one more 8 MiB body in about 1 run in 7 of TestAttackLineBreakBomb,
// and a second later never. What the relay keeps for good stays in every
// reading.
func settledHeap() int64 {
	low := heapInUse()
	deadline := time.Now().Add(wait)
	for steady := 0; steady < 10 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond) // lets an unwinding goroutine finish
		if h := heapInUse(); h < low-256<<10 {
			low, steady = h, 0
		} else {
			steady++
		}
	}
	return low
}

// procNumber reads the number after field (such as "VmRSS:") in
// /proc/<pid>/<file>; ok is false where /proc does not have it.
func procNumber(pid, file, field string) (n int64, ok bool) {
	b, err := os.ReadFile("/proc/" + pid + "/" + file)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, found := strings.CutPrefix(line, field); found {
			_, err := fmt.Sscan(v, &n)
			return n, err == nil
		}
	}
	return 0, false
}

// rss returns the process's resident memory, or 0 where /proc is missing.
func rss() int64 {
	kb, _ := procNumber("self", "status", "VmRSS:")
	return kb << 10
}

// memoryFactor is the documented bound (docs/DEPLOY.md): the relay's live
// heap stays within this many times Options.TotalHistoryBytes, plus the
// uploads in flight, whatever the streams do.
const memoryFactor = 2

func checkMemory(t *testing.T, rl *relaytest.Relay, base, total int64) {
	t.Helper()
	// The relay's count first: a stream that was cut off may still let go
	// of what it held while the heap is measured (never take more), and
	// nothing of the client's (its last request) may stay live.
	http.DefaultClient.CloseIdleConnections()
	st := rl.Server.Stats()
	grown := settledHeap() - base
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
	// At a quarter of the sizes an attacker would use (32 MiB, 8 MiB
	// bodies): the same shape, and an event seven times a body's size
	// left uncounted would still be far over checkMemory's 4 MiB of slack.
	const total = 8 << 20
	rl := relaytest.Start(t, relay.Options{TotalHistoryBytes: total, HistoryBytes: total})
	base := heapInUse()
	for range 2 {
		stuckStream(t, rl, rl.Channel)
	}
	body := "{" + strings.Repeat("\n", 2<<20) + "}"
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

// Item: a budget for uploads in flight that strangers cannot lock. A
// thousand uploads from four addresses announce bodies (1 MiB, under the
// allowance kept for small deliveries, and 8 MiB) and send one byte: each
// holds what it sent (a 4 KiB buffer), not what it announced, so the
// budget stays nearly free and a canary on another address keeps getting
// 200. Beyond an address's share, its uploads get 503 with Retry-After;
// /healthz then says "degraded", and the log says which limit refused.
// (Before, bookings of the announced sizes made every POST 503.)
func TestAttackUploadFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("an upload flood (a few seconds); run without -short")
	}
	const budget, size = 32 << 20, 8 << 20
	rl := relaytest.Start(t, relay.Options{MaxUploadBytes: budget, MaxBodyBytes: size, TrustedProxies: loopbackProxy})
	host := strings.TrimPrefix(rl.Base, "http://")
	channel := strings.TrimPrefix(rl.Channel, rl.Base)
	const attackers = 1000
	for i := range attackers {
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		announced := 1 << 20
		if i%10 == 0 {
			announced = size
		}
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.%d\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", channel, 1+i%4, announced)
	}
	waitFor(t, "the uploads to be counted", func() bool { return rl.Server.Stats().UploadBytes >= attackers*4<<10 })
	if got := rl.Server.Stats().UploadBytes; got > attackers*4<<10 {
		t.Errorf("uploads in flight hold %d bytes, want at most 4 KiB each (%d): what arrived, not what was announced", got, attackers*4<<10)
	}
	for i := range 5 {
		start := time.Now()
		req, _ := http.NewRequest(http.MethodPost, rl.Channel, bytes.NewReader(relaytest.Body(i, 4<<10)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forwarded-For", "198.51.100.9")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("canary %d: %s, want 200 while %d uploads hang", i+1, resp.Status, attackers)
		}
		t.Logf("canary %d answered %d in %s", i+1, resp.StatusCode, time.Since(start))
	}

	// One address beyond its share (a quarter of the budget): 503. Each
	// upload sends 2 MiB of 8 and waits, its buffer grown to 4 MiB: two
	// fill the share, and the next ones from that address are refused.
	// (Uploads one at a time, each counted before the next: nothing here
	// depends on how fast the relay reads.)
	share := int64(budget / 4)
	var log relaytest.Buffer // a relay of its own: the flood's uploads above time out after 10 s
	rl = relaytest.Start(t, relay.Options{MaxUploadBytes: budget, MaxBodyBytes: size, TrustedProxies: loopbackProxy,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	host, channel = strings.TrimPrefix(rl.Base, "http://"), strings.TrimPrefix(rl.Channel, rl.Base)
	for i := range 4 {
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		before := rl.Server.Stats().UploadBytes
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 192.0.2.1\r\nContent-Length: %d\r\n\r\n", channel, size)
		conn.Write(bytes.Repeat([]byte("x"), 2<<20))
		if int64(i+1)*(4<<20) <= share {
			waitFor(t, "the upload to be counted", func() bool { return rl.Server.Stats().UploadBytes >= before+4<<20 })
			continue
		}
		conn.SetReadDeadline(time.Now().Add(relaytest.HangGuard))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("upload %d of one address: no answer beyond its share: %v", i+1, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("upload %d of one address beyond its share: %s, want 503 with Retry-After", i+1, resp.Status)
		}
	}
	resp, err := http.Get(rl.Base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	var h struct{ Status, Error string }
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || h.Status != "degraded" {
		t.Errorf("/healthz = %d %q, want 200 \"degraded\" after refused uploads", resp.StatusCode, h.Status)
	}
	if !strings.Contains(log.String(), "upload refused") || !strings.Contains(log.String(), "its share of the relay's budget") {
		t.Errorf("the log does not say which limit refused:\n%s", log.String())
	}
}

// subscribeFrom opens a stream on u as client ip, through a trusted proxy
// on loopback (X-Forwarded-For), and returns the answer's status.
func subscribeFrom(t *testing.T, u, ip string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("X-Forwarded-For", ip)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		t.Cleanup(func() { resp.Body.Close() })
	}
	return resp, err
}

var loopbackProxy = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

// Item: a cap on streams. Beyond the relay's cap and one client's cap,
// streams get 503 with Retry-After, while POSTs still get through (the
// descriptors they need are not all taken by streams).
func TestAttackStreamFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("a stream flood (a few seconds); run without -short")
	}
	var log relaytest.Buffer
	rl := relaytest.Start(t, relay.Options{MaxStreams: 40, MaxStreamsPerIP: 25, MaxSubscribersPerIP: 100, TrustedProxies: loopbackProxy,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	status := map[string]map[int]int{}
	for _, ip := range []string{"203.0.113.1", "203.0.113.2"} {
		status[ip] = map[int]int{}
		for range 30 {
			resp, err := subscribeFrom(t, rl.Base+"/"+rl.Server.NewChannel(), ip)
			if err != nil {
				t.Fatal(err)
			}
			status[ip][resp.StatusCode]++
			if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
				t.Errorf("503 without Retry-After")
			}
		}
	}
	want := map[string]map[int]int{
		"203.0.113.1": {200: 25, 503: 5}, // its own cap
		// The relay's cap: past it, the client holding the most (the
		// first) lost its oldest streams to this one until they held
		// within two of each other (25-5 = 20 = 15+5).
		"203.0.113.2": {200: 20, 503: 10},
	}
	if !reflect.DeepEqual(status, want) {
		t.Errorf("answers by client = %v, want %v", status, want)
	}
	mustPost(t, rl.Channel, `{"canary":1}`, "Content-Type", "application/json")
	if n := rl.Server.Stats().Subscribers; n != 40 {
		t.Errorf("%d streams open, want the cap, 40", n)
	}
	if !strings.Contains(log.String(), "level=WARN msg=\"stream refused\"") {
		t.Errorf("refused streams are not logged as warnings:\n%s", log.String())
	}
}

// Item: a channel's owner cannot be locked out. A stranger who knows the
// channel's name opens ten times the streams one address may hold on it,
// before and after the owner joins: the owner is never cut off and gets
// every delivery.
func TestAttackChannelSquatter(t *testing.T) {
	if testing.Short() {
		t.Skip("a stream flood (a few seconds); run without -short")
	}
	rl := relaytest.Start(t, relay.Options{MaxSubscribers: 100, MaxSubscribersPerIP: 10, TrustedProxies: loopbackProxy})
	squat := func() {
		for range 100 {
			if resp, err := subscribeFrom(t, rl.Channel, "203.0.113.66"); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("stranger's stream: %v %v", resp, err)
			}
		}
	}
	squat()
	resp, err := subscribeFrom(t, rl.Channel, "198.51.100.1")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("owner's stream: %v %v", resp, err)
	}
	squat()
	mustPost(t, rl.Channel, `{"n":1}`, "Content-Type", "application/json")
	if n := rl.Server.Stats().Subscribers; n != 11 {
		t.Errorf("%d streams on the channel, want 11 (ten of the stranger's, the owner's)", n)
	}
	br := bufio.NewReader(resp.Body)
	done := make(chan string, 1)
	go func() {
		for {
			line, err := br.ReadString('\n')
			if err != nil || strings.HasPrefix(line, "id: 1") {
				done <- fmt.Sprint(line, err)
				return
			}
		}
	}()
	select {
	case got := <-done:
		if !strings.HasPrefix(got, "id: 1") {
			t.Errorf("the owner's stream ended before its delivery: %s", got)
		}
	case <-time.After(relaytest.HangGuard):
		t.Fatal("the owner's stream got no delivery")
	}
}

// Errors of the HTTP server itself (here: accepting a connection fails, as
// when file descriptors run out) are logged as warnings, not hidden at
// debug level.
func TestServeLogsAcceptErrors(t *testing.T) {
	var log relaytest.Buffer
	srv := mustNew(t, relay.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	fl := &failingListener{Listener: ln}
	fl.fails.Store(1)
	go func() { done <- srv.Serve(ctx, fl) }()
	waitFor(t, "the accept error to be logged", func() bool { return strings.Contains(log.String(), "Accept error") })
	cancel()
	<-done
	if !strings.Contains(log.String(), "level=WARN") {
		t.Errorf("the accept error is not a warning:\n%s", log.String())
	}
}

// failingListener fails its first Accepts with a temporary error, as
// accept(2) does with EMFILE.
type failingListener struct {
	net.Listener
	fails atomic.Int32
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, emfile{}
	}
	return l.Listener.Accept()
}

type emfile struct{}

func (emfile) Error() string   { return "accept: too many open files" }
func (emfile) Timeout() bool   { return false }
func (emfile) Temporary() bool { return true }

// Item: redelivery is not a write amplifier. Chained redeliveries of a large
// delivery, as fast as one client can ask: beyond a burst of ten they get
// 429 with Retry-After, and those stored are references, not copies.
func TestAttackRedeliveryChain(t *testing.T) {
	if testing.Short() {
		t.Skip("a write attack (a few seconds); run without -short")
	}
	dir := t.TempDir()
	// A history of two such deliveries: each redelivery evicts the one
	// before, the first one the original, which must be held, not copied.
	rl := relaytest.Start(t, relay.Options{DataDir: dir, HistoryBytes: 16 << 20, RedeliveriesPerMinute: 1}) // no refill within the test
	body := `{"a":"` + strings.Repeat("x", 8<<20) + `"}`
	code, resp := post(t, rl.Channel, body, "Content-Type", "application/json")
	if code != http.StatusOK {
		t.Fatal(code, resp)
	}
	before := written(t)
	status := map[int]int{}
	id := 1
	for range 40 {
		code, resp := post(t, fmt.Sprintf("%s/redeliver/%d", rl.Channel, id), "")
		status[code]++
		var a struct{ ID int }
		if code == http.StatusOK && json.Unmarshal([]byte(resp), &a) == nil {
			id = a.ID // chained: a redelivery of the last redelivery
		}
	}
	grown := written(t) - before
	t.Logf("40 chained redeliveries of an 8 MiB delivery: %v; %.1f MiB written", status, float64(grown)/(1<<20))
	if status[http.StatusOK] != 10 || status[http.StatusTooManyRequests] != 30 {
		t.Errorf("answers = %v, want 10 × 200 (the burst), then 429", status)
	}
	if n := rl.Server.Stats().Refused.Redeliveries; n != 30 {
		t.Errorf("Stats().Refused.Redeliveries = %d, want the 30 refused", n)
	}
	// bbolt rewrites the leaf that holds the delivery (copy on write)
	// until that leaf has five keys, whatever they are: at most four more
	// times, not once per redelivery.
	if grown > 5*int64(len(body)) {
		t.Errorf("%d bytes written for 10 redeliveries of %d bytes: copies, not references", grown, len(body))
	}
}

// written returns the bytes the process has passed to write(2) and
// pwrite(2), from /proc/self/io; the test is skipped without it.
func written(t *testing.T) int64 {
	n, ok := procNumber("self", "io", "wchar:")
	if !ok {
		t.Skip("no /proc/self/io to count bytes written")
	}
	return n
}

// A stranger asking to redeliver ids that do not exist spends its own
// budget, not the channel's: the owner, from another address, can still
// redeliver.
func TestRedeliveryBudgetNotSpentOnMissingIDs(t *testing.T) {
	rl := relaytest.Start(t, relay.Options{RedeliveriesPerMinute: 1, TrustedProxies: loopbackProxy}) // a burst of ten, no refill within the test
	rl.Publish(t, nil, 1, relaytest.Body(1, 10))
	redeliver := func(ip string, id int) int {
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/redeliver/%d", rl.Channel, id), nil)
		req.Header.Set("X-Forwarded-For", ip)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	codes := map[int]int{}
	for id := 1000; id < 1030; id++ {
		codes[redeliver("203.0.113.66", id)]++
	}
	if codes[http.StatusNotFound] != 10 || codes[http.StatusTooManyRequests] != 20 {
		t.Errorf("the stranger's answers %v, want 10 404s then 429s (its own budget)", codes)
	}
	if code := redeliver("198.51.100.7", 1); code != http.StatusOK {
		t.Errorf("the owner's redelivery = %d, want 200: the channel's budget is untouched", code)
	}
}

// Item: a cap on connections. Idle connections from one address take its
// share (MaxConnsPerIP) and no more: the next from it is closed at once,
// before a byte is read, while a POST from another address gets 200.
// (Before, every idle connection held a descriptor until the header
// timeout, and 20,200 of them stopped the relay accepting anything.)
func TestAttackConnectionFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("a connection flood; run without -short")
	}
	const perIP, attackers = 50, 300
	srv := mustNew(t, relay.Options{MaxConnsPerIP: perIP, MaxConns: 200})
	addr, cancel, done := serve(t, srv)
	t.Cleanup(func() { cancel(); <-done })
	for range attackers {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
	}
	waitFor(t, "the flood to be counted", func() bool {
		st := srv.Stats()
		return st.Connections == perIP && st.ConnsRefused == attackers-perIP
	})
	probe, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	io.WriteString(probe, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	probe.SetReadDeadline(time.Now().Add(relaytest.HangGuard))
	if answer, err := io.ReadAll(probe); len(answer) != 0 || (err != nil && !errors.Is(err, syscall.ECONNRESET)) {
		t.Errorf("one more connection from the flooding address got %q, %v; want it closed at once (EOF or reset)", answer, err)
	}
	// Another address on this machine (all of 127/8 is loopback on Linux).
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	resp, err := other.Post("http://"+addr+"/canary", "application/json", strings.NewReader(`{"ok":true}`))
	if err != nil {
		t.Fatalf("a POST from another address: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a POST from another address = %s, want 200", resp.Status)
	}
}

// Item: a full relay makes room for newcomers. Twenty addresses holding
// two streams each fill it; a channel owner from a new address still gets
// its stream, in place of a stranger's oldest. One IPv6 /48 holds at most
// four times the per-address share, however many /64s it uses. (Before,
// every newcomer got 503 once the relay was full.)
func TestAttackStreamsFromManyAddresses(t *testing.T) {
	rl := relaytest.Start(t, relay.Options{MaxStreams: 40, MaxStreamsPerIP: 5, TrustedProxies: loopbackProxy})
	open := func(ip string) int {
		resp, err := subscribeFrom(t, rl.Base+"/"+rl.Server.NewChannel(), ip)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode
	}
	for i := range 20 {
		for range 2 {
			if code := open(fmt.Sprintf("203.0.113.%d", i+1)); code != http.StatusOK {
				t.Fatalf("stranger %d: %d, want 200 while the relay has room", i+1, code)
			}
		}
	}
	if code := open("198.51.100.7"); code != http.StatusOK {
		t.Errorf("the owner's stream on a full relay = %d, want 200 (a stranger's oldest cut)", code)
	}
	waitFor(t, "a stranger's stream to be cut", func() bool { return rl.Server.Stats().Subscribers == 40 })

	codes := map[int]int{}
	for i := range 30 {
		codes[open(fmt.Sprintf("2001:db8:aa:%x::1", i))]++ // thirty /64s of one /48
	}
	if codes[http.StatusServiceUnavailable] < 10 {
		t.Errorf("one /48 from thirty /64s: %v, want at most 20 admitted (4 x 5)", codes)
	}
}
