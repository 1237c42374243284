package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	r3 "github.com/r3labs/sse/v2"
)

// scriptReader returns its chunks one per Read, then blocks until closed
// (a stream with nothing more to say yet), then returns err.
type scriptReader struct {
	chunks []string
	read   int // chunks returned
	hold   chan struct{}
	err    error
}

func (r *scriptReader) Read(p []byte) (int, error) {
	if len(r.chunks) == 0 {
		<-r.hold
		return 0, r.err
	}
	n := copy(p, r.chunks[0])
	if n < len(r.chunks[0]) {
		r.chunks[0] = r.chunks[0][n:]
	} else {
		r.chunks = r.chunks[1:]
		r.read++
	}
	return n, nil
}

func (r *scriptReader) Close() error { return nil }

// TestStreamBodyNeverHoldsAnEvent checks that a Read returns as soon as
// the bytes hold a blank line, in every form and split across reads, and
// goes on reading while they do not.
func TestStreamBodyNeverHoldsAnEvent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before string   // returned by earlier Reads
		chunks []string // what the stream sends before going quiet
		want   string   // what the Read returns
	}{
		{"one read", "", []string{"data: a\n\n"}, "data: a\n\n"},
		{"LF LF split", "", []string{"data: a\n", "\n"}, "data: a\n\n"},
		{"CR CR split", "", []string{"data: a\r", "\r"}, "data: a\r\r"},
		{"CRLF CRLF split", "", []string{"data: a\r\n", "\r", "\n"}, "data: a\r\n\r\n"},
		{"LF CR LF split", "", []string{"data: a\n\r", "\n"}, "data: a\n\r\n"},
		{"CR LF LF", "", []string{"data: a\r\n", "\n"}, "data: a\r\n\n"},
		{"filled from many reads", "", []string{"da", "ta: ", strings.Repeat("x", 100), "\n", "\n"}, "data: " + strings.Repeat("x", 100) + "\n\n"},
		{"comment", "", []string{": keepalive\n\n"}, ": keepalive\n\n"},
		{"boundary across Reads", "data: a\n", []string{"\n"}, "\n"},
		{"CRLF boundary across Reads", "data: a\r\n\r", []string{"\n"}, "\n"},
		{"next event starts with the rest", "", []string{"data: a\n", "\nid: 2\ndata: b"}, "data: a\n\nid: 2\ndata: b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr := &scriptReader{chunks: append([]string{tc.before}, tc.chunks...), hold: make(chan struct{})}
			defer close(sr.hold)
			f := &streamBody{rc: sr}
			if tc.before != "" {
				// What r3labs already has, returned by earlier Reads into a
				// buffer that filled up.
				buf := make([]byte, len(tc.before))
				if n, err := f.Read(buf); n != len(buf) || err != nil {
					t.Fatalf("first Read = %d, %v", n, err)
				}
			} else {
				sr.chunks = sr.chunks[1:]
			}
			got := make(chan string, 1)
			go func() {
				buf := make([]byte, 4096)
				n, _ := f.Read(buf)
				got <- string(buf[:n])
			}()
			select {
			case s := <-got:
				if s != tc.want {
					t.Errorf("Read = %q, want %q", s, tc.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("Read blocked although the bytes so far hold a blank line")
			}
		})
	}
}

func TestStreamBodyStopsAtAFullBufferAndErrors(t *testing.T) {
	sr := &scriptReader{chunks: []string{"data: ", "abcdef"}, hold: make(chan struct{}), err: io.ErrUnexpectedEOF}
	f := &streamBody{rc: sr}
	buf := make([]byte, 8)
	if n, err := f.Read(buf); n != 8 || err != nil || string(buf) != "data: ab" {
		t.Errorf("Read = %d, %v, %q; want 8, nil, %q", n, err, buf[:n], "data: ab")
	}
	close(sr.hold)
	// The stream broke in the middle of an event: the bytes, then a line
	// naming the event truncatedEvent (r3labs dispatches it; Subscribe
	// drops it), then the error.
	for _, want := range []struct {
		s   string
		err error
	}{{"cdef", nil}, {"\nevent: " + truncatedEvent + "\n\n", nil}, {"", io.ErrUnexpectedEOF}} {
		buf = make([]byte, 64)
		n, err := f.Read(buf)
		if string(buf[:n]) != want.s || !errors.Is(err, want.err) {
			t.Errorf("Read = %q, %v; want %q, %v", buf[:n], err, want.s, want.err)
		}
	}
	if !f.truncated.Load() {
		t.Error("truncated is not set")
	}
}

// TestStreamBodyWithR3labs reads a stream of small and large events through
// the filler and r3labs' reader, in small socket reads.
func TestStreamBodyWithR3labs(t *testing.T) {
	var stream bytes.Buffer
	var want []string
	for i, size := range []int{10, 70000, 0, 3 << 20, 5} {
		data := strings.Repeat(string(rune('a'+i)), size)
		fmt.Fprintf(&stream, "id: %d\ndata: %s\r\n\r\n: comment\n\n", i, data)
		want = append(want, fmt.Sprintf("id: %d\ndata: %s", i, data), ": comment")
	}
	r := r3.NewEventStreamReader(&streamBody{rc: io.NopCloser(&smallReads{r: &stream, chunk: 1000})}, DefaultMaxEventSize)
	for i, w := range want {
		ev, err := r.ReadEvent()
		if err != nil || string(ev) != w {
			t.Fatalf("event %d: %d bytes (%v), want %d bytes", i, len(ev), err, len(w))
		}
	}
	if _, err := r.ReadEvent(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last event: %v, want EOF", err)
	}
}

// smallReads returns at most chunk bytes per Read, like a socket.
type smallReads struct {
	r     io.Reader
	chunk int
}

func (c *smallReads) Read(p []byte) (int, error) {
	if len(p) > c.chunk {
		p = p[:c.chunk]
	}
	return c.r.Read(p)
}

// BenchmarkR3labsFilled is BenchmarkR3labsEventStreamReader with the
// filler that HTTPTransport puts in front of r3labs: compare the two. The
// time per event now grows with its size, not its square.
//
//	go test -run '^$' -bench 'R3labs' ./internal/sse/
func BenchmarkR3labsFilled(b *testing.B) {
	for _, mib := range []int{1, 4, 16, 33} {
		b.Run(fmt.Sprintf("%dMiB", mib), func(b *testing.B) {
			event := append(append([]byte("data: "), bytes.Repeat([]byte("A"), mib<<20)...), "\n\n"...)
			b.SetBytes(int64(len(event)))
			for b.Loop() {
				body := &streamBody{rc: io.NopCloser(&smallReads{r: bytes.NewReader(event), chunk: 64 << 10})}
				r := r3.NewEventStreamReader(body, DefaultMaxEventSize)
				if ev, err := r.ReadEvent(); err != nil || len(ev) != len(event)-2 {
					b.Fatalf("ReadEvent: %d bytes, %v", len(ev), err)
				}
			}
		})
	}
}

// BenchmarkR3labsEventStreamReader measures r3labs' EventStreamReader alone
// on one event of growing size, read 64 KiB at a time. Its split function
// searches the whole buffered event for a blank line after every read, so
// the time per event grows with the square of its size: compare ns/op
// across sizes (a linear reader would scale like the size).
func BenchmarkR3labsEventStreamReader(b *testing.B) {
	for _, mib := range []int{1, 4, 16, 33} {
		b.Run(fmt.Sprintf("%dMiB", mib), func(b *testing.B) {
			event := append(append([]byte("data: "), bytes.Repeat([]byte("A"), mib<<20)...), "\n\n"...)
			b.SetBytes(int64(len(event)))
			for b.Loop() {
				r := r3.NewEventStreamReader(&smallReads{r: bytes.NewReader(event), chunk: 64 << 10}, DefaultMaxEventSize)
				if ev, err := r.ReadEvent(); err != nil || len(ev) != len(event)-2 {
					b.Fatalf("ReadEvent: %d bytes, %v", len(ev), err)
				}
			}
		})
	}
}

// stepReader returns the chunks the test sends it, one per Read, and logs
// each Read as it is called (before it waits for its chunk).
type stepReader struct {
	next chan string
	log  func(string)
}

func (r *stepReader) Read(p []byte) (int, error) {
	r.log("read")
	chunk, ok := <-r.next
	if !ok {
		return 0, io.EOF
	}
	return copy(p, chunk), nil
}

func (r *stepReader) Close() error { return nil }

// r3labs' read loop hands each event over an unbuffered channel and reads
// on at once; at a user's rate that read finds nothing and parks. The
// handler is to run first, so that a delivery is sent before that read
// and not after it: with one processor (forward in order) the sender on a
// channel otherwise runs on until it blocks. It is a scheduling hint, not a
// guarantee (one time in 61 the scheduler takes from its global queue
// first), so most events are asked for, not all; before, none was handled
// before the next read.
func TestStreamBodyHandsAnEventOverBeforeReadingOn(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var mu sync.Mutex
	var log []string
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		log = append(log, s)
	}
	src := &stepReader{next: make(chan string), log: note}
	r := r3.NewEventStreamReader(&streamBody{rc: src}, DefaultMaxEventSize)
	out := make(chan []byte) // as r3labs' own: unbuffered
	go func() {              // r3labs' readLoop
		defer close(out)
		for {
			ev, err := r.ReadEvent()
			if err != nil {
				return
			}
			out <- ev
		}
	}()
	const events = 20
	ready := make(chan bool, 1)
	go func() { // the relay: the next event comes once the handler waits for it
		defer close(src.next)
		for i := range events {
			<-ready
			src.next <- fmt.Sprintf("data: %d\n\n", i)
		}
	}()
	for i := range events { // the handler, as r3labs' Subscribe runs it
		ready <- true
		if ev := <-out; string(ev) != fmt.Sprintf("data: %d", i) {
			t.Fatalf("event %d: %q", i, ev)
		}
		note("handled")
	}
	for range out {
	}
	mu.Lock()
	defer mu.Unlock()
	first, reads, handled := 0, 0, 0 // first: events handled before the stream was read again
	for _, call := range log {
		switch call {
		case "read":
			reads++
		case "handled":
			if reads == handled+1 {
				first++
			}
			handled++
		}
	}
	if first < events*3/4 {
		t.Errorf("%d of %d events handled before the stream was read again, want most; calls: %v", first, events, log)
	}
}
