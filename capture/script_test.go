package capture_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/testutil/testenv"
)

// A script written by WriteScript re-sends the delivery byte for byte with
// the real curl: method, headers (one with a quote), query, and a body with
// line breaks and bytes that are not UTF-8, which curl -d would change.
func TestWriteScriptResendsExactBytes(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		testenv.Missing(t, "curl", "install Debian's curl")
	}
	body := []byte("{\n  \"a\": \"it's\"\n}\r\n\xff\x00end")
	d := &delivery.Delivery{
		ID: "d-1", Event: "push", ReceivedAt: time.Unix(1700000000, 0), Method: http.MethodPost, Query: "x=1&y=it%27s",
		Headers: http.Header{
			"Content-Type": {"application/json"}, "X-Github-Event": {"push"}, "X-Github-Delivery": {"d-1"},
			"X-Quote": {`it's "quoted" $HOME`}, "Host": {"relay.example"}, "Content-Length": {"999"},
		},
		Body: body,
	}
	dir := t.TempDir()
	path, err := capture.Write(dir, capture.File{Delivery: *d})
	if err != nil {
		t.Fatal(err)
	}
	script, err := capture.WriteScript(path, d, "http://127.0.0.1:1/unused")
	if err != nil {
		t.Fatal(err)
	}
	type sent struct {
		r    *http.Request
		body []byte
	}
	requests := make(chan sent, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		requests <- sent{r, b}
	}))
	t.Cleanup(srv.Close)
	// The script, and the command Curl gives (the inspector's "copy as
	// curl"), send the same request.
	for _, cmd := range []*exec.Cmd{exec.Command("sh", script, srv.URL+"/hook"), exec.Command("sh", "-c", capture.Curl(d, srv.URL+"/hook"))} {
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd.Args, err, out)
		}
		var got sent
		select {
		case got = <-requests:
		default:
			t.Fatalf("%s sent nothing", cmd.Args)
		}
		checkResent(t, cmd.Args[1], d, body, got.r, got.body)
	}
}

func checkResent(t *testing.T, what string, d *delivery.Delivery, body []byte, got *http.Request, gotBody []byte) {
	t.Helper()
	if got == nil || got.Method != http.MethodPost || got.URL.Path != "/hook" || got.URL.RawQuery != d.Query {
		t.Fatalf("the script sent %v", got)
	}
	if !bytes.Equal(gotBody, body) {
		t.Errorf("%s: body = %q, want %q", what, gotBody, body)
	}
	for _, k := range []string{"Content-Type", "X-Github-Event", "X-Github-Delivery", "X-Quote"} {
		if got.Header.Get(k) != d.Headers.Get(k) {
			t.Errorf("header %s = %q, want %q", k, got.Header.Get(k), d.Headers.Get(k))
		}
	}
	if got.Host == "relay.example" || got.Header.Get("Expect") != "" {
		t.Errorf("Host %q, Expect %q: want curl's own host and no Expect", got.Host, got.Header.Get("Expect"))
	}
}

// gosmee's --saveDir files read as a delivery: the body's exact bytes, the
// headers of its curl script, the event and time from the file name.
func TestReadGosmeeSaveDir(t *testing.T) {
	dir := t.TempDir()
	body := []byte(`{"action":"opened","zen":"x"}`)
	base := filepath.Join(dir, "issues-20260115T09h30")
	// As gosmee's saveData writes them (its replay_script template).
	script := "#!/bin/bash\n# Replay script with headers and json to the target controller\nset -euxf\ncd $(dirname $(readlink -f $0))\n\n" +
		"targetURL=\"http://localhost:8080\"\n[[ ${1:-\"\"} == -l ]] && targetURL=${GOSMEE_DEBUG_SERVICE:-\"http://localhost:8080\"}\n" +
		"curl -H \"Content-Type: application/json\" -H 'X-Github-Event: issues' -H 'X-Github-Delivery: 72d3162e' -H 'X-Hub-Signature-256: sha256=abc' -H 'User-Agent: GitHub-Hookshot/044aadd'  -X POST -d @./issues-20260115T09h30.json ${targetURL}\n"
	if err := os.WriteFile(base+".json", body, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".sh", []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ds, errs := capture.LoadAll(dir)
	if len(errs) > 0 || len(ds) != 1 {
		t.Fatalf("LoadAll = %d deliveries, %v", len(ds), errs)
	}
	d := ds[0]
	want := time.Date(2026, 1, 15, 9, 30, 0, 0, time.UTC)
	if d.Event != "issues" || d.Action != "opened" || d.ID != "72d3162e" || !d.ReceivedAt.Equal(want) || !bytes.Equal(d.Body, body) ||
		d.Headers.Get("Content-Type") != "application/json" || d.Headers.Get("X-Hub-Signature-256") != "sha256=abc" || d.Headers.Get("User-Agent") != "GitHub-Hookshot/044aadd" {
		t.Errorf("read %+v", d)
	}
	// A .json without a script is still not a capture.
	os.Remove(base + ".sh")
	if _, err := capture.Read(base + ".json"); err == nil {
		t.Error("a payload without gosmee's script read as a delivery")
	}
}

// A header value gosmee saved with single quotes inside comes back whole:
// its script quotes them the shell's way.
func TestReadGosmeeQuotedHeader(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "push-20260115T09h30")
	script := "#!/bin/bash\ncurl -H \"Content-Type: application/json\" -H 'X-Github-Event: push' -H 'X-Note: it'\\''s a '\\''quoted'\\'' value' \\\n  -H 'X-Empty: ' -X POST -d @./push-20260115T09h30.json ${targetURL}\n"
	os.WriteFile(base+".json", []byte(`{}`), 0o644)
	os.WriteFile(base+".sh", []byte(script), 0o755)
	d, err := capture.Read(base + ".json")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Headers.Get("X-Note"); got != "it's a 'quoted' value" {
		t.Errorf("X-Note = %q, want it's a 'quoted' value", got)
	}
	if d.Headers.Get("Content-Type") != "application/json" || d.Event != "push" {
		t.Errorf("headers %v", d.Headers)
	}
	// What sh itself makes of the same word.
	testenv.Tools(t, "sh")
	out, err := exec.Command("sh", "-c", "printf '%s' 'it'\\''s a '\\''quoted'\\'' value'").Output()
	if err != nil || string(out) != d.Headers.Get("X-Note") {
		t.Errorf("sh reads %q (%v), the reader %q", out, err, d.Headers.Get("X-Note"))
	}
}

// Deliveries gosmee saved within one minute (its file names stop there)
// are replayed in the order their files were written.
func TestReadGosmeeOrderWithinAMinute(t *testing.T) {
	dir := t.TempDir()
	minute := time.Date(2026, 1, 15, 9, 30, 0, 0, time.UTC)
	// Names that sort the other way round from the order they were saved.
	for i, event := range []string{"push", "issues", "check_run"} {
		base := filepath.Join(dir, event+"-20260115T09h30")
		script := "curl -H 'X-Github-Event: " + event + "' -X POST -d @./x.json ${targetURL}\n"
		os.WriteFile(base+".json", []byte(`{"n":`+strconv.Itoa(i)+`}`), 0o644)
		os.WriteFile(base+".sh", []byte(script), 0o755)
		at := minute.Add(time.Duration(10+i*10) * time.Second)
		if err := os.Chtimes(base+".json", at, at); err != nil {
			t.Fatal(err)
		}
	}
	ds, errs := capture.LoadAll(dir)
	if len(errs) > 0 || len(ds) != 3 {
		t.Fatalf("LoadAll = %d, %v", len(ds), errs)
	}
	for i, want := range []string{"push", "issues", "check_run"} {
		if ds[i].Event != want {
			t.Errorf("delivery %d is %s, want %s (the order the files were written)", i, ds[i].Event, want)
		}
	}
}

// What the real gosmee client wrote with --saveDir (testdata/gosmee/
// savedir, recorded as its README says) reads back as the three deliveries
// it received, in order, their quoted header values whole, its doubled
// Content-Type once.
func TestReadGosmeeRealSaveDir(t *testing.T) {
	ds, errs := capture.LoadAll("../testdata/gosmee/savedir")
	if len(errs) > 0 || len(ds) != 3 {
		t.Fatalf("LoadAll = %d deliveries, %v", len(ds), errs)
	}
	for i, d := range ds {
		n := strconv.Itoa(i + 1)
		if d.ID != "saved-"+n || d.Event != "issues" || d.Action != "opened" || string(d.Body) != `{"action":"opened","n":`+n+`}` {
			t.Errorf("delivery %d: %s %s.%s %q", i+1, d.ID, d.Event, d.Action, d.Body)
		}
		if got := d.Headers.Get("X-Note"); got != "it's a 'quoted' value "+n {
			t.Errorf("delivery %d: X-Note %q", i+1, got)
		}
		if ct := d.Headers.Values("Content-Type"); len(ct) != 1 || ct[0] != "application/json" {
			t.Errorf("delivery %d: Content-Type %q, want application/json once", i+1, ct)
		}
	}
}
