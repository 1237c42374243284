package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/r3labs/sse/v2"
)

// chunked returns b in reads of at most n bytes.
type chunked struct {
	b []byte
	n int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), c.n, len(c.b))
	copy(p, c.b[:n])
	c.b = c.b[n:]
	return n, nil
}

func (c *chunked) Close() error { return nil }

// r3labsTokens splits a stream into events with r3labs' own reader, the
// reader the limiter feeds.
func r3labsTokens(t testing.TB, stream []byte, max int) [][]byte {
	t.Helper()
	r := sse.NewEventStreamReader(bytes.NewReader(stream), max)
	var out [][]byte
	for {
		ev, err := r.ReadEvent()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("r3labs ReadEvent after %d events: %v", len(out), err)
		}
		out = append(out, bytes.Clone(ev))
	}
}

// limited passes stream through an eventLimiter in reads of chunk bytes.
func limited(t testing.TB, stream []byte, max, chunk int) []byte {
	t.Helper()
	out, err := io.ReadAll(newEventLimiter(&chunked{b: stream, n: chunk}, max, nil))
	if err != nil {
		t.Fatalf("reading through the limiter: %v", err)
	}
	return out
}

// checkLimited asserts the limiter's contract on one stream: r3labs reads
// the output with a buffer of max+limiterSlack, finds as many events as in
// the input, each either unchanged or, for an input event over max, cut to
// a prefix of at most max bytes and named OversizeEvent.
func checkLimited(t testing.TB, stream []byte, max, chunk int) {
	t.Helper()
	out := limited(t, stream, max, chunk)
	in := r3labsTokens(t, stream, len(stream)+16)
	got := r3labsTokens(t, out, max+limiterSlack)
	if len(got) != len(in) {
		t.Fatalf("limit %d, chunk %d: %d events out, %d in\nin:  %q\nout: %q", max, chunk, len(got), len(in), stream, out)
	}
	marker := "event: " + OversizeEvent
	for i := range in {
		if bytes.Equal(got[i], in[i]) {
			continue
		}
		prefix, ok := bytes.CutSuffix(got[i], []byte(marker))
		if !ok {
			t.Fatalf("limit %d, chunk %d: event %d changed without the marker:\nin:  %q\nout: %q", max, chunk, i, in[i], got[i])
		}
		// The prefix may end with the line break the cut came after (line
		// breaks do not count towards the limit at the end of a prefix).
		content := bytes.TrimRight(prefix, "\r\n")
		if len(in[i]) <= max || len(content) > max || !bytes.HasPrefix(in[i], content) {
			t.Fatalf("limit %d, chunk %d: event %d (%d bytes) cut to %d bytes %q", max, chunk, i, len(in[i]), len(prefix), prefix)
		}
	}
}

func TestEventLimiter(t *testing.T) {
	big := strings.Repeat("x", 100)
	tests := []struct {
		name   string
		stream string
	}{
		{"small events pass unchanged", "id: 1\ndata: a\n\nid: 2\ndata: b\n\n"},
		{"one long line", "id: 1\ndata: a\n\nid: 2\ndata: " + big + "\n\nid: 3\ndata: c\n\n"},
		{"many short lines", "id: 1\n" + strings.Repeat("data: abcdefgh\n", 20) + "\nid: 2\ndata: ok\n\n"},
		{"CRLF", "id: 1\r\ndata: " + big + "\r\n\r\nid: 2\r\ndata: ok\r\n\r\n"},
		{"CR only", "id: 1\rdata: " + big + "\r\rid: 2\rdata: ok\r\r"},
		{"LF CRLF", "data: " + big + "\n\r\ndata: ok\n\n"},
		{"CRLF LF", "data: " + big + "\r\n\ndata: ok\n\n"},
		{"cut right after a line break", "id: 1\ndata: 0123456789012345678901234567890123456789\ndata: " + big + "\n\ndata: ok\n\n"},
		{"oversized event at the end, unterminated", "data: ok\n\ndata: " + big},
		{"exactly the limit", "data: " + strings.Repeat("y", 58) + "\n\ndata: ok\n\n"},
		{"blank lines only", "\n\n\n\r\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, chunk := range []int{1, 2, 3, 7, 64, 4096} {
				checkLimited(t, []byte(tt.stream), 64, chunk)
			}
		})
	}
}

// The limiter keeps r3labs' buffer bounded: with a 1 KiB limit, r3labs
// with a buffer of limit+slack reads a 1 MiB event without ErrTooLong.
func TestEventLimiterBoundsR3labs(t *testing.T) {
	stream := "id: 1\ndata: " + strings.Repeat("z", 1<<20) + "\n\nid: 2\ndata: ok\n\n"
	r := sse.NewEventStreamReader(newEventLimiter(&chunked{b: []byte(stream), n: 32 << 10}, 1024, nil), 1024+limiterSlack)
	var n int
	for {
		_, err := r.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, bufio.ErrTooLong) || err != nil {
			t.Fatalf("ReadEvent after %d events: %v", n, err)
		}
		n++
	}
	if n != 2 {
		t.Errorf("read %d events, want 2", n)
	}
}

// FuzzEventLimiter checks the limiter's contract (see checkLimited) on any
// byte stream, limit and read size.
//
//	go test ./proxy -run '^$' -fuzz FuzzEventLimiter -fuzztime 1m
func FuzzEventLimiter(f *testing.F) {
	f.Add([]byte("id: 1\ndata: hello\n\nid: 2\ndata: "+strings.Repeat("x", 300)+"\n\n"), uint16(64), uint8(5))
	f.Add([]byte("data: a\r\n\r\ndata: bb\r\rdata: ccc\n\r\n"), uint16(3), uint8(1))
	f.Add([]byte(": keepalive\n\nevent: ping\ndata: {}\n\n"), uint16(8), uint8(2))
	f.Fuzz(func(t *testing.T, stream []byte, max uint16, chunk uint8) {
		if max == 0 || chunk == 0 {
			return
		}
		checkLimited(t, stream, int(max), int(chunk))
	})
}
