package relay

import (
	"bytes"
	"io"
	"net"
	"net/http/httputil"
	"testing"
)

// writeCounter is a connection that records each Write: a wrapped
// connection, as the relay's are (countedConn), not a *net.TCPConn.
type writeCounter struct {
	net.Conn
	writes [][]byte
}

func (w *writeCounter) Write(b []byte) (int, error) {
	w.writes = append(w.writes, bytes.Clone(b))
	return len(b), nil
}

// What a stream writes up to a Flush goes out as one chunk in one write,
// on any connection: each write to a loopback socket wakes the client
// (three writes of each event before). Events larger than the buffer are
// chunks of their own, and the bytes are valid chunked encoding.
func TestStreamChunkInOneWrite(t *testing.T) {
	conn := &writeCounter{}
	o := &connOut{conn: conn}
	event := bytes.Repeat([]byte("d"), 4494)
	o.Write([]byte("id: 2\n"))
	o.Write(event)
	if err := o.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(conn.writes) != 1 {
		t.Fatalf("one event took %d writes: %q", len(conn.writes), conn.writes)
	}
	want := append([]byte("id: 2\n"), event...)
	if got := unchunk(t, conn.writes[0]); !bytes.Equal(got, want) {
		t.Errorf("the chunk holds %d bytes, want the event's %d", len(got), len(want))
	}

	// More than a buffer holds: what came before, then the large one.
	conn.writes = nil
	large := bytes.Repeat([]byte("L"), 100<<10)
	o.Write([]byte("id: 3\n"))
	o.Write(large)
	o.Write([]byte("\n\n"))
	if err := o.Flush(); err != nil {
		t.Fatal(err)
	}
	// Each chunk in one write: what came before, the large one, the end.
	if len(conn.writes) != 3 {
		t.Errorf("a large event took %d writes, want 3 chunks of one write each", len(conn.writes))
	}
	var all []byte
	for _, w := range conn.writes {
		unchunk(t, w) // each write is a whole chunk
		all = append(all, w...)
	}
	want = append(append([]byte("id: 3\n"), large...), "\n\n"...)
	if got := unchunk(t, all); !bytes.Equal(got, want) {
		t.Errorf("a large event: %d bytes after decoding, want %d", len(got), len(want))
	}
	if o.buf != nil {
		t.Error("the buffer is held after Flush")
	}
}

func unchunk(t *testing.T, b []byte) []byte {
	t.Helper()
	got, err := io.ReadAll(httputil.NewChunkedReader(io.MultiReader(bytes.NewReader(b), bytes.NewReader([]byte("0\r\n\r\n")))))
	if err != nil {
		t.Fatalf("not chunked encoding: %v: %q", err, b[:min(len(b), 40)])
	}
	return got
}
