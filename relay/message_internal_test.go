package relay

import (
	"bytes"
	"encoding/json"
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
	plain, ext := d.frame(false), d.frame(true)
	if n := bytes.Count(plain, []byte("\ndata: ")); n != 0 {
		t.Errorf("the plain event has %d continuation lines, want 0", n)
	}
	if len(plain) > 1024 {
		t.Errorf("the plain event takes %d bytes for a %d-byte body of line breaks, want it compact", len(plain), len(body))
	}
	if len(ext) > len(body)*4/3+1024 {
		t.Errorf("the extended event takes %d bytes, want about the base64 of the body (%d)", len(ext), len(body)*4/3)
	}
	got, _, err := wire.Decode(bytes.ReplaceAll(bytes.TrimSuffix(ext, []byte("\n\n")), []byte("\ndata: "), []byte("\n"))[len("data: "):])
	if err != nil || !bytes.Equal(got.Body, body) {
		t.Errorf("bodyB does not hold the exact body: %v", err)
	}
	var v map[string]any
	if err := json.Unmarshal(d.bodyJSON, &v); err != nil || string(d.bodyJSON) != `{"a":[1,2]}` {
		t.Errorf("body = %q (%v), want the compact JSON", d.bodyJSON, err)
	}
}
