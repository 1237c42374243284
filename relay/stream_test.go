package relay_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/wire"
	"github.com/hookline/hookline/relay"
)

// An idle subscriber costs the relay little: its connection, its place in
// the channel and two small goroutines, not net/http's connection buffers
// and serving goroutine (which took 26 KiB of heap and stack each).
func TestIdleSubscriberCost(t *testing.T) {
	const n = 300
	srv, ts := newRelay(t, relay.Options{MaxStreams: n, MaxStreamsPerIP: n, MaxSubscribers: n, MaxSubscribersPerIP: n})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := dialStream(addr(ts), "/idle")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	waitFor(t, "the subscribers", func() bool { return srv.Stats().Subscribers == n })
	runtime.GC()
	runtime.ReadMemStats(&after)
	// The clients' side (a connection and a 512-byte reader each) is in
	// this process too: about 1 KiB of the figure; the race detector adds
	// 4 or 5 KiB (10 KiB in all without it, 14 with it; 27.5 before the
	// streams left net/http).
	perSub := (int64(after.HeapAlloc) - int64(before.HeapAlloc) + int64(after.StackInuse) - int64(before.StackInuse)) / n
	if perSub > 18<<10 {
		t.Errorf("an idle subscriber costs %d bytes of heap and stack, want at most 18 KiB (the goal is under 20)", perSub)
	}
	// They still get deliveries.
	mustPost(t, ts.URL+"/idle", `{"n":1}`)
	for _, c := range conns[:3] {
		c.SetReadDeadline(time.Now().Add(wait))
		br := bufio.NewReader(c)
		for line := ""; line != "id: 1\n"; { // the chunks' sizes come between
			var err error
			if line, err = br.ReadString('\n'); err != nil {
				t.Fatalf("an idle subscriber's stream: %v before id: 1", err)
			}
		}
	}
}

// An HTTP/1.0 client, which cannot read chunks, gets its stream through
// net/http, delimited by the connection's end.
func TestStreamHTTP10(t *testing.T) {
	srv, ts := newRelay(t, relay.Options{})
	conn, err := net.Dial("tcp", addr(ts))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(wait))
	io.WriteString(conn, "GET /old HTTP/1.0\r\nAccept: text/event-stream\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || len(resp.TransferEncoding) != 0 {
		t.Fatalf("HTTP/1.0 stream: %d %v, want 200 without chunks", resp.StatusCode, resp.TransferEncoding)
	}
	waitFor(t, "the subscriber", func() bool { return srv.Stats().Subscribers == 1 })
	mustPost(t, ts.URL+"/old", `{"old":true}`)
	srv.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || !strings.Contains(string(b), "event: ready\n") || !strings.Contains(string(b), "id: 1\n") {
		t.Errorf("HTTP/1.0 stream read %q, %v; want ready and id 1, then EOF", b, err)
	}
}

// Serve's shutdown waits for streams only until its timeout: a subscriber
// that does not read is then cut off, and Serve says so.
func TestServeShutdownCutsStuckStreams(t *testing.T) {
	srv := mustNew(t, relay.Options{ShutdownTimeout: 50 * time.Millisecond, WriteTimeout: time.Hour, HistoryBytes: 1 << 30, TotalHistoryBytes: 1 << 30, SubscriberQueue: 1000})
	addr, cancel, done := serve(t, srv)
	base := "http://" + addr

	stuck, err := dialStream(addr, "/stuck") // smee.io's shape: bodies inline, never by link
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	// A small receive buffer, so that the relay's writes soon block.
	stuck.(*bufferedConn).Conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	waitFor(t, "the subscriber", func() bool { return srv.Stats().Subscribers == 1 })
	// More than the sockets' buffers hold (the relay's is 4 MiB at most
	// here): its write blocks.
	body := `"` + strings.Repeat("x", 1<<20) + `"`
	for range 16 {
		mustPost(t, base+"/stuck", body, "Content-Type", "application/json")
	}
	if st := srv.Stats(); st.Subscribers != 1 {
		t.Fatalf("stats %+v, want the stuck subscriber still there", st)
	}
	cancel()
	if err := served(t, done); err == nil || !strings.Contains(err.Error(), "were cut") {
		t.Errorf("Serve = %v, want an error saying requests were cut", err)
	}
}

// A stream's client that sends anything after its request (a pipelined
// request, junk) is disconnected: the relay does not read for it.
func TestStreamClientThatTalksIsDisconnected(t *testing.T) {
	srv, ts := newRelay(t, relay.Options{})
	conn, err := dialStream(addr(ts), "/talk")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitFor(t, "the subscriber", func() bool { return srv.Stats().Subscribers == 1 })
	io.WriteString(conn, "GET /talk HTTP/1.1\r\nHost: x\r\n\r\n")
	waitFor(t, "the talking subscriber to be gone", func() bool { return srv.Stats().Subscribers == 0 })
	conn.SetReadDeadline(time.Now().Add(wait))
	// EOF, or a reset (the relay closes with the client's bytes unread);
	// not a timeout.
	if _, err := io.Copy(io.Discard, conn); err != nil && strings.Contains(err.Error(), "timeout") {
		t.Errorf("the connection did not end: %v", err)
	}
}

// An HTTP/2 stream, whose connection cannot be hijacked, stays on the
// ResponseWriter and works as before.
func TestStreamHTTP2(t *testing.T) {
	srv := mustNew(t, relay.Options{})
	ts := httptest.NewUnstartedServer(srv)
	ts.EnableHTTP2 = true
	ts.StartTLS()
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/two", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK {
		t.Fatalf("stream over %s: %d, want HTTP/2 200", resp.Proto, resp.StatusCode)
	}
	waitFor(t, "the subscriber", func() bool { return srv.Stats().Subscribers == 1 })
	post, err := ts.Client().Post(ts.URL+"/two", "application/json", strings.NewReader(`{"h2":true}`))
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	br := bufio.NewReader(resp.Body)
	for line := ""; line != "id: 1\n"; {
		if line, err = br.ReadString('\n'); err != nil {
			t.Fatalf("HTTP/2 stream: %v before id: 1", err)
		}
	}
	srv.Close()
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Errorf("HTTP/2 stream ended with %v, want a clean end", err)
	}
}

// A burst larger than the old default count (100) but within the history's
// bytes loses nothing with the default limits: a subscriber that falls
// SubscriberQueue deliveries behind is cut off, and resumes from the
// history without a gap; so does one that was away for the whole burst.
func TestBurstWithinTheBytesResumesWithoutAGap(t *testing.T) {
	const n = 300
	srv, ts := newRelay(t, relay.Options{SubscriberQueue: 32})
	channel := ts.URL + "/burst-channel-0123456789"
	away := subscribe(t, channel)
	away.ready()
	away.close() // gone for the whole burst
	// The slow subscriber reads nothing until the burst is over.
	conn, err := net.Dial("tcp", addr(ts))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /burst-channel-0123456789 HTTP/1.1\r\nHost: relay\r\nAccept: text/event-stream\r\n\r\n")
	// Its head and ready event, read before the burst: it has joined, and
	// gets every delivery from the first (had the relay taken the GET
	// after some POSTs, it would have started later, and the ids the test
	// expects from it and its resume would never all come).
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the slow stream's ready event: %v", err)
		}
		if line == "\n" {
			break
		}
		if strings.HasPrefix(line, "data: ") && line != "data: {\"last\":0}\n" {
			t.Fatalf("the slow stream's ready event says %q, want the channel empty", line)
		}
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{br, resp.Body} // what br read ahead is read first
	pad := strings.Repeat("x", 64<<10) // 300 × 64 KiB: more than the sockets hold, less than 50 MiB
	for i := 1; i <= n; i++ {
		mustPost(t, channel, fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, pad), "Content-Type", "application/json")
	}
	slow := &stream{t: t, resp: resp, events: make(chan event, 4096)}
	go slow.read()
	var got []string
	for ended := false; !ended; { // what it was sent before the cut-off, then the end
		select {
		case ev, ok := <-slow.events:
			if ended = !ok; ok && ev.Event == "" {
				got = append(got, ev.ID)
			}
		case <-time.After(wait):
			t.Fatalf("the slow stream did not end after its cut-off; it got %d deliveries", len(got))
		}
	}
	if len(got) == n || srv.Stats().CutOff != 1 {
		t.Fatalf("the slow subscriber was never cut off (it got %d): the test does not test a resume", len(got))
	}
	last := "0"
	if len(got) > 0 {
		last = got[len(got)-1]
	}
	for _, resume := range []struct {
		who, last string
		before    []string
	}{{"the cut-off subscriber", last, got}, {"the one that was away", "0", nil}} {
		s := subscribe(t, channel, "Last-Event-ID", resume.last)
		if last := s.ready(); last != n {
			t.Fatalf("%s: the ready event says the channel's last id is %d, want %d", resume.who, last, n)
		}
		all := resume.before
		for len(all) < n {
			ev := s.next()
			if ev.Event != "" {
				t.Fatalf("%s got a %s event after %s: %s", resume.who, ev.Event, resume.last, ev.Data)
			}
			all = append(all, ev.ID)
		}
		if want := ids(1, n); !slices.Equal(all, want) {
			t.Errorf("%s got ids %v…, want 1 to %d in order", resume.who, all[:min(len(all), 10)], n)
		}
		s.close()
	}
}

// At a user's rate a delivery is on an idle subscriber's stream before its
// POST is answered, as if the POST's own goroutine had written it: the
// stream's goroutine, woken by the delivery, runs before the answer is
// written. Otherwise it runs after: the answer's write and the request's
// end were on every delivery's way (about 0.06 ms on a small VM). With one
// processor the order is the scheduler's, which looks at its global queue
// first one time in 61: most, not all, are asked for.
func TestStreamWrittenBeforeThePostIsAnswered(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wl := &writeLog{Listener: ln}
	srv := mustNew(t, relay.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, wl)
	url := "http://" + ln.Addr().String() + "/order"
	s := subscribe(t, url, wire.StreamHeader, "1") // as hookline forward asks
	s.ready()
	const n = 20
	for i := range n {
		mustPost(t, url, fmt.Sprintf(`{"n":"m%03d"}`, i), "Content-Type", "application/json")
		if ev := s.next(); !strings.Contains(ev.Data, fmt.Sprintf("m%03d", i)) {
			t.Fatalf("delivery %d: the stream has %q", i, ev.Data)
		}
	}
	writes := wl.all()
	first := 0
	for i := range n {
		stream := slices.IndexFunc(writes, func(w string) bool { return strings.Contains(w, fmt.Sprintf("m%03d", i)) })
		answer := slices.IndexFunc(writes, func(w string) bool {
			return strings.HasPrefix(w, "HTTP/1.1 200") && strings.Contains(w, fmt.Sprintf(`{"id":%d,`, i+1))
		})
		if stream < 0 || answer < 0 {
			t.Fatalf("delivery %d: no stream write (%d) or no answer (%d) among %q", i, stream, answer, writes)
		}
		if stream < answer {
			first++
		}
	}
	if first < n*3/4 {
		t.Errorf("%d of %d deliveries written to the stream before their POST was answered, want most", first, n)
	}
}

// writeLog is a listener whose connections note what each Write writes, in
// the order they were made over all of them.
type writeLog struct {
	net.Listener
	mu     sync.Mutex
	writes []string
}

func (l *writeLog) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &loggedConn{Conn: c, log: l}, nil
}

func (l *writeLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.writes)
}

type loggedConn struct {
	net.Conn
	log *writeLog
}

func (c *loggedConn) Write(b []byte) (int, error) {
	c.log.mu.Lock()
	c.log.writes = append(c.log.writes, string(b))
	c.log.mu.Unlock()
	return c.Conn.Write(b)
}
