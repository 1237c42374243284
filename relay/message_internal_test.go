package relay

import (
	"bytes"
	"encoding/json"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/wire"
)

// A JSON body made of line breaks (valid, pretty-printed or hostile) no
// longer multiplies in the message: "body" carries it compact, as smee.io's
// JSON.stringify does, and bodyB the exact bytes. Before, every line break
// became "\ndata: ": 7 bytes of event per byte of body.
func TestLineBreaksDoNotMultiplyTheEvent(t *testing.T) {
	body := []byte("{" + strings.Repeat("\n", 1<<20) + `"a":` + strings.Repeat("\r\n", 1000) + "[1,\n2]}")
	d := makeDelivery([]wire.Header{{Name: "content-type", Value: "application/json"}, {Name: "x-github-event", Value: "push"}}, "", body, time.Unix(0, 0))
	plain, ext := d.frame(formatSmee).Bytes(), d.frame(formatHookline).Bytes()
	if n := bytes.Count(plain, []byte("\ndata: ")); n != 0 {
		t.Errorf("the plain event has %d continuation lines, want 0", n)
	}
	if len(plain) > 1024 {
		t.Errorf("the plain event takes %d bytes for a %d-byte body of line breaks, want it compact", len(plain), len(body))
	}
	if len(ext) > len(body)*4/3+1024 {
		t.Errorf("the extended event takes %d bytes, want about the base64 of the body (%d)", len(ext), len(body)*4/3)
	}
	got, err := wire.DecodeDelivery(bytes.ReplaceAll(bytes.TrimSuffix(ext, []byte("\n\n")), []byte("\ndata: "), []byte("\n"))[len("data: "):])
	if err != nil || !bytes.Equal(got.Body, body) {
		t.Errorf("bodyB does not hold the exact body: %v", err)
	}
	var v map[string]json.RawMessage
	if err := json.Unmarshal(bytes.TrimPrefix(bytes.TrimSuffix(plain, []byte("\n\n")), []byte("data: ")), &v); err != nil || string(v["body"]) != `{"a":[1,2]}` {
		t.Errorf("body = %s (%v), want the compact JSON", v["body"], err)
	}
}

// A delivery counts, in the history limits, the memory it holds: its
// fields and its encoded messages (measured on the heap, for JSON bodies
// that need no copy, that do, and a form). Frames hold no copy of a large
// body: bodyB is encoded as it is written.
func TestDeliverySizeCountsItsMemory(t *testing.T) {
	const n = 1 << 20 // 16 times the slack below: a delivery held twice, or its frame cached uncounted, is far over it
	for _, tt := range []struct {
		name, contentType string
		body              []byte
	}{
		{"compact JSON", "application/json", []byte(`{"a":"` + strings.Repeat("x", n) + `"}`)},
		{"line breaks", "application/json", []byte("{" + strings.Repeat("\n", n) + "}")},
		{"pretty JSON", "application/json", []byte("[\n" + strings.Repeat("1,\n", n/3) + "1]")},
		{"form", "application/x-www-form-urlencoded", []byte("payload=" + strings.Repeat("%7B", n/3))},
		{"binary", "application/octet-stream", bytes.Repeat([]byte{0}, n)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			header := []wire.Header{{Name: "content-type", Value: tt.contentType}, {Name: "x-github-event", Value: "push"}}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			d := makeDelivery(header, "a=1", tt.body, time.Unix(0, 0))
			for _, ext := range []streamFormat{formatSmee, formatHookline} { // as subscribers would
				if _, err := d.frame(ext).WriteTo(io.Discard); err != nil {
					t.Fatal(err)
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			held := int64(after.HeapAlloc) - int64(before.HeapAlloc) + int64(len(tt.body))
			if slack := int64(64 << 10); held > d.size+slack || d.size > held+int64(entryOverhead)+slack {
				t.Errorf("the delivery holds %d bytes of heap, counts %d", held, d.size)
			}
			runtime.KeepAlive(d)
		})
	}
}
