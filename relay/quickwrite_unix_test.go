//go:build unix

package relay_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookline/hookline/relay"
)

// A delivery to a subscriber whose stream waits for news is written by
// the POST's own goroutine before the POST is answered, whatever the
// processors: when the answer arrives, the event is already in the
// stream's socket. (The stream's goroutine, woken to write it, ran on
// another processor when there was one, often after the answer.)
func TestIdleStreamWrittenBeforeThePostIsAnswered(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(4, runtime.GOMAXPROCS(0))))
	defer relay.SetQuietGap(0)() // each delivery comes right after the last
	_, ts := newRelay(t, relay.Options{PingInterval: time.Hour})
	c, err := dialStream(addr(ts), "/quick")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bc := c.(*bufferedConn)
	url := ts.URL + "/quick"
	// The first deliveries may come while the stream's goroutine is still
	// on its way to wait for news: until one is written by its POST.
	for i := 0; ; i++ {
		want := fmt.Sprintf("warm%d", i)
		mustPost(t, url, `{"n":"`+want+`"}`, "Content-Type", "application/json")
		if strings.Contains(string(readNow(t, bc)), want) {
			break
		}
		readUntil(t, bc, want)
		if i == 50 {
			t.Fatal("no delivery was in the stream's socket when its POST was answered")
		}
	}

	// With the stream's goroutine woken to write each, 2 to 26 of 1000
	// were not (10 runs of this test, all failed).
	const n = 1000
	waiting := 0
	for i := range n {
		want := fmt.Sprintf("m%03d", i)
		mustPost(t, url, `{"n":"`+want+`"}`, "Content-Type", "application/json")
		got := string(readNow(t, bc))
		if !strings.Contains(got, want) {
			waiting++
			readUntil(t, bc, want)
		}
	}
	if waiting > 0 {
		t.Errorf("%d of %d deliveries not in the stream's socket when their POST was answered, want none", waiting, n)
	}
}

// readNow returns what c has buffered and what its socket holds now,
// without waiting.
func readNow(t *testing.T, c *bufferedConn) []byte {
	t.Helper()
	out := make([]byte, c.r.Buffered())
	c.r.Read(out)
	rc, err := c.Conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		for {
			n, e := syscall.Read(int(fd), buf)
			switch {
			case e == syscall.EINTR:
				continue
			case e == syscall.EAGAIN:
			case e != nil:
				rerr = e
			case n > 0:
				out = append(out, buf[:n]...)
				continue
			}
			return true
		}
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readUntil reads c until what it read holds want.
func readUntil(t *testing.T, c *bufferedConn, want string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(wait))
	defer c.SetReadDeadline(time.Time{})
	var got []byte
	buf := make([]byte, 4096)
	for !strings.Contains(string(got), want) {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("reading the stream for %q: %v (got %q)", want, err, got)
		}
		got = append(got, buf[:n]...)
	}
}

// A subscriber that stops reading holds up no POST: what its socket does
// not take when a POST writes for it is written by the stream's goroutine
// once there is room, in order and whole.
func TestQuickWriteToASubscriberThatDoesNotRead(t *testing.T) {
	defer relay.SetQuietGap(0)()
	srv, ts := newRelay(t, relay.Options{PingInterval: time.Hour, SubscriberQueue: 10000, HistoryBytes: 64 << 20, WriteTimeout: time.Minute})
	url := ts.URL + "/stalled"
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	for _, want := range []string{"event: ready\n", "data: {\"last\":0}\n"} {
		if line, err := br.ReadString('\n'); line != want {
			t.Fatalf("the stream has %q, %v; want %q", line, err, want)
		}
	}
	pad := strings.Repeat("x", 16<<10)
	const n = 1000 // 16 MiB: more than the two sockets' buffers hold
	for i := range n {
		mustPost(t, url, fmt.Sprintf(`{"n":"m%04d","pad":"%s"}`, i, pad), "Content-Type", "application/json")
	}
	for i := 0; i < n; {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d of %d deliveries: %v (%+v)", i, n, err, srv.Stats())
		}
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		if want := fmt.Sprintf(`"n":"m%04d","pad":"%s"`, i, pad); !strings.Contains(line, want) {
			t.Fatalf("delivery %d: got %.80q…, want m%04d whole", i, line, i)
		}
		i++
	}
}
