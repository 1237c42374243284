package capture_test

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/delivery"
)

var received = time.Date(2026, 11, 22, 10, 0, 0, 123000000, time.UTC)

func TestMarshalGolden(t *testing.T) {
	d := capture.File{
		Delivery: delivery.Delivery{
			ID:         "72d3162e-cc78-11e3-81ab-4c9367dc0958",
			Event:      "issues",
			ReceivedAt: received,
			Method:     "POST",
			Headers: http.Header{
				"Content-Type":   {"application/json"},
				"X-Github-Event": {"issues"},
			},
			Body: []byte(`{"action":"opened","html":"<a>&"}`),
		},
		Action: "opened",
		Source: "http://127.0.0.1:3333/abc",
	}
	got, err := capture.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "version": 1,
  "id": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
  "event": "issues",
  "action": "opened",
  "received_at": "2026-11-22T10:00:00.123Z",
  "source": "http://127.0.0.1:3333/abc",
  "method": "POST",
  "headers": {
    "Content-Type": [
      "application/json"
    ],
    "X-Github-Event": [
      "issues"
    ]
  },
  "body_encoding": "text",
  "body": "{\"action\":\"opened\",\"html\":\"<a>&\"}"
}
`
	if string(got) != want {
		t.Errorf("Marshal =\n%s\nwant\n%s", got, want)
	}
}

func TestRoundTripKeepsBytes(t *testing.T) {
	tests := []struct {
		name         string
		body         []byte
		wantEncoding string
	}{
		{"json", []byte(`{"a":"\u00e9 é \/"}` + "\n"), `"body_encoding": "text"`},
		{"form", []byte("payload=%7B%22a%22%3A1%7D&x=1+2"), `"body_encoding": "text"`},
		{"binary", []byte{0xff, 0xfe, 0x00, 0x01, 'a'}, `"body_encoding": "base64"`},
		{"empty", []byte{}, `"body_encoding": "text"`},
		{"control characters", []byte("a\x00b\r\n\t"), `"body_encoding": "text"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := capture.File{Delivery: delivery.Delivery{ID: "id-1", Event: "push", ReceivedAt: received, Headers: http.Header{"X-A": {"1", "2"}}, Body: tt.body}}
			data, err := capture.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), tt.wantEncoding) {
				t.Errorf("document lacks %s:\n%s", tt.wantEncoding, data)
			}
			out, err := capture.Unmarshal(data)
			if err != nil {
				t.Fatal(err)
			}
			if string(out.Body) != string(tt.body) {
				t.Errorf("body = %q, want %q", out.Body, tt.body)
			}
			if !reflect.DeepEqual(out.Headers, in.Headers) {
				t.Errorf("headers = %v, want %v", out.Headers, in.Headers)
			}
			if !out.ReceivedAt.Equal(received) {
				t.Errorf("received_at = %v, want %v", out.ReceivedAt, received)
			}
		})
	}
}

func TestUnmarshalErrors(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		wantErr error
		wantMsg string
	}{
		{"not json", `nope`, capture.ErrMalformed, "malformed"},
		{"no version", `{"event":"push"}`, capture.ErrMalformed, `no "version"`},
		{"future version", `{"version":2,"event":"push"}`, capture.ErrVersion, "version 2 (this hookline reads version 1"},
		{"no event", `{"version":1,"body_encoding":"text","body":""}`, capture.ErrMalformed, `no "event"`},
		{"bad base64", `{"version":1,"event":"push","body_encoding":"base64","body":"!!"}`, capture.ErrMalformed, "not valid base64"},
		{"bad encoding", `{"version":1,"event":"push","body_encoding":"hex","body":"00"}`, capture.ErrMalformed, `body_encoding "hex"`},
		{"unknown field", `{"version":1,"event":"push","body_encoding":"text","body":"","bodyy":""}`, capture.ErrMalformed, "bodyy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := capture.Unmarshal([]byte(tt.doc))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Unmarshal(%q) error = %v, want %v", tt.doc, err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not say %q", err, tt.wantMsg)
			}
		})
	}
}

func TestFileNameIsSafe(t *testing.T) {
	tests := []struct {
		event, id string
		want      string
	}{
		{"issues", "72d3162e-cc78-11e3", "20261122T100000.123Z-issues-72d3162e-cc78-11e3.json"},
		{"../../etc", "../passwd", "20261122T100000.123Z-______etc-___passwd.json"},
		{"push", "", "20261122T100000.123Z-push-noid.json"},
		{"a/b\\c", ".hidden", "20261122T100000.123Z-a_b_c-_hidden.json"},
		{"push", strings.Repeat("x", 100), "20261122T100000.123Z-push-" + strings.Repeat("x", 64) + ".json"},
	}
	for _, tt := range tests {
		got := capture.FileName(&delivery.Delivery{Event: tt.event, ID: tt.id, ReceivedAt: received})
		if got != tt.want {
			t.Errorf("FileName(event %q, id %q) = %q, want %q", tt.event, tt.id, got, tt.want)
		}
	}
}

func TestWriteNeverOverwritesAndLoadSorts(t *testing.T) {
	dir := t.TempDir()
	later := capture.File{Delivery: delivery.Delivery{ID: "b", Event: "push", ReceivedAt: received.Add(time.Second), Body: []byte("2")}}
	first := capture.File{Delivery: delivery.Delivery{ID: "a", Event: "push", ReceivedAt: received, Body: []byte("1")}}
	p1, err := capture.Write(dir, later)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := capture.Write(dir, first)
	if err != nil {
		t.Fatal(err)
	}
	p3, err := capture.Write(dir, first) // same name again
	if err != nil {
		t.Fatal(err)
	}
	if p3 == p2 || filepath.Base(p3) != "20261122T100000.123Z-push-a-2.json" {
		t.Errorf("second write of the same delivery went to %q (first %q)", p3, p2)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".capture-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
	got, err := capture.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var bodies, paths []string
	for _, d := range got {
		bodies = append(bodies, string(d.Body))
		paths = append(paths, d.Path)
	}
	if want := []string{"1", "1", "2"}; !reflect.DeepEqual(bodies, want) {
		t.Errorf("Load order bodies = %v, want %v", bodies, want)
	}
	if paths[2] != p1 {
		t.Errorf("last path = %q, want %q", paths[2], p1)
	}
}

func TestLoadNamesTheBadFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "broken.json")
	if err := os.WriteFile(bad, []byte(`{"version":7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := capture.Load(dir)
	if !errors.Is(err, capture.ErrVersion) || !strings.Contains(err.Error(), bad) {
		t.Errorf("Load error = %v, want ErrVersion naming %s", err, bad)
	}
	if _, err := capture.Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no capture files") {
		t.Errorf("Load(empty dir) error = %v, want 'no capture files'", err)
	}
}

func TestWriteToMissingDirFails(t *testing.T) {
	_, err := capture.Write(filepath.Join(t.TempDir(), "missing"), capture.File{Delivery: delivery.Delivery{Event: "push"}})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Write to a missing dir error = %v, want os.ErrNotExist", err)
	}
}

// FuzzUnmarshal checks that no input crashes the reader and that whatever it
// accepts survives a write and a second read unchanged.
//
//	go test -run '^$' -fuzz FuzzUnmarshal -fuzztime 60s ./capture/
func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte(`{"version":1,"id":"x","event":"push","received_at":"2026-11-22T10:00:00Z","headers":{"A":["b"]},"body_encoding":"base64","body":"/w=="}`))
	f.Add([]byte(`{"version":1,"event":"push","body_encoding":"text","body":"{}"}`))
	f.Add([]byte(`{"version":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := capture.Unmarshal(data)
		if err != nil {
			return
		}
		again, err := capture.Marshal(d)
		if err != nil {
			t.Fatalf("Marshal of an accepted document failed: %v", err)
		}
		d2, err := capture.Unmarshal(again)
		if err != nil {
			t.Fatalf("re-read failed: %v\n%s", err, again)
		}
		if string(d2.Body) != string(d.Body) || d2.Event != d.Event || d2.ID != d.ID {
			t.Fatalf("round trip changed the delivery: %+v vs %+v", d, d2)
		}
	})
}
