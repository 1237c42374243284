package interop

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	hldelivery "github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/inspect"
	"github.com/hookline/hookline/proxy"
)

// TestInspectorSeveralTargetsInChromium: with two targets, the inspector's
// list shows both verdicts in the row, and the detail has a block for
// each target's answer.
func TestInspectorSeveralTargetsInChromium(t *testing.T) {
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "app took it") }))
	t.Cleanup(app.Close)
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, "worker failed")
	}))
	t.Cleanup(worker.Close)
	b := startBrowser(t)
	in := inspect.New(inspect.Options{})
	client, err := proxy.New(proxy.Options{Targets: []proxy.Target{{Name: "app", URL: app.URL}, {Name: "worker", URL: worker.URL}}, OnResult: in.Add, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go in.Serve(t.Context(), ln)
	client.Handle(t.Context(), &hldelivery.Delivery{ID: "two-targets-1", Event: "ping", Body: []byte(`{"zen":"x"}`),
		Headers: http.Header{"X-Github-Delivery": {"two-targets-1"}, "X-Github-Event": {"ping"}, "Content-Type": {"application/json"}}})

	p := b.newPage(1400, 900)
	p.must("Page.navigate", map[string]any{"url": inspect.URL(ln, in.Token())}, nil)
	p.waitFor("the delivery", `document.querySelectorAll("#list tbody tr").length === 1`)
	row := p.text(`document.querySelector("#list tbody tr").innerText`)
	if !strings.Contains(row, "app 200") || !strings.Contains(row, "worker 500") {
		t.Errorf("the row says %q, want both targets' verdicts", row)
	}
	p.must("Runtime.evaluate", map[string]any{"expression": `document.querySelector("#list tbody tr").click()`}, nil)
	p.waitFor("the detail", `document.querySelector("#detail .answer-body-worker") !== null`)
	detail := p.text(`document.getElementById("detail").innerText`)
	for _, want := range []string{"target app", "target worker", "app took it", "worker failed", "target failed"} {
		if !strings.Contains(detail, want) {
			t.Errorf("the detail lacks %q:\n%s", want, detail)
		}
	}
	if problems := b.problems(); len(problems) > 0 {
		t.Errorf("the browser reported %v", problems)
	}
}
