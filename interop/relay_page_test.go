package interop

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/relay"
)

// TestRelayPageInChromium opens a channel's page in headless Chromium and
// uses it as a person would: the page loads (with no script error or CSP
// violation), a POSTed delivery appears live, expanding it shows its headers
// and pretty-printed payload, and its redeliver button sends it again (a
// subscriber gets a second delivery). A screenshot is saved; its path is
// logged (go test -v), in $HOOKLINE_ARTIFACTS or the system's temp folder.
func TestRelayPageInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: an interop test (chromium)")
	}
	b := startBrowser(t)
	rl := relaytest.Start(t, relay.Options{})
	srv, base := rl.Server, rl.Base
	channel := base + "/" + srv.NewChannel()

	// Something already in the history shows up when the page loads.
	postForm(t, channel)

	p := b.newPage(1280, 900)
	p.must("Page.navigate", map[string]any{"url": channel}, nil)
	p.waitFor("the stream to connect", `document.getElementById("status")?.dataset.state === "connected"`)
	if got := p.text(`document.getElementById("channel-url").value`); got != channel {
		t.Errorf("channel URL field = %q, want %q", got, channel)
	}
	if p.text(`String(document.getElementById("guessable").hidden)`) != "true" {
		t.Error("a 22-character channel is warned about as guessable")
	}
	p.waitFor("the form delivery from the history", `document.querySelectorAll("#deliveries li.delivery").length === 1`)

	// A subscriber of our own, to see the redelivery arrive.
	sub := subscribeLines(t, channel)

	// Escapes and a number's spelling that JSON.parse and JSON.stringify
	// would change: the page reads the body's own bytes from hookline's
	// message ("body" with "bodyB": null).
	body := `{"action":"opened","issue":{"number":42,"title":"Relay page test \u00e9\/","score":1.50e3},"repository":{"full_name":"octo/hello"}}`
	req, _ := http.NewRequest(http.MethodPost, channel, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issues")
	req.Header.Set("X-GitHub-Delivery", "9a1b2c3d-0000-4000-8000-000000000042")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if id := sub.nextID(t); id != "2" {
		t.Fatalf("subscriber got id %q, want 2", id)
	}

	p.waitFor("the delivery to appear live", `document.querySelectorAll("#deliveries li.delivery").length === 2`)
	first := `document.querySelector('#deliveries li.delivery[data-id="2"]')`
	if got := p.text(`document.querySelector("#deliveries li.delivery").dataset.id`); got != "2" {
		t.Errorf("the newest delivery listed first is %q, want 2", got)
	}
	summary := p.text(first + `.querySelector("summary").innerText`)
	for _, want := range []string{"#2", "issues.opened", "9a1b2c3d-0000-4000-8000-000000000042"} {
		if !strings.Contains(summary, want) {
			t.Errorf("newest delivery's summary %q lacks %q", summary, want)
		}
	}

	// Expanding shows the headers and the pretty-printed payload.
	p.must("Runtime.evaluate", map[string]any{"expression": first + `.querySelector("summary").click()`}, nil)
	p.waitFor("the payload", first+`.querySelector("pre.payload") !== null`)
	payload := p.text(first + `.querySelector("pre.payload").textContent`)
	if !strings.Contains(payload, "{\n  \"action\": \"opened\",\n  \"issue\": {\n    \"number\": 42,") {
		t.Errorf("payload shown as\n%s\nwant it pretty-printed", payload)
	}
	if got, want := p.text(first+`.querySelector("pre.payload").previousElementSibling.textContent`), fmt.Sprintf("Payload (JSON, %d bytes)", len(body)); got != want {
		t.Errorf("payload heading %q, want %q: the page must hold the body's exact bytes", got, want)
	}
	headers := p.text(first + `.querySelector("table.headers").innerText`)
	if !strings.Contains(headers, "x-github-event\tissues") {
		t.Errorf("headers table %q lacks x-github-event issues", headers)
	}
	p.must("Runtime.evaluate", map[string]any{"expression": `document.getElementById("copy").click()`}, nil)

	// Redeliver: the relay publishes it again, the page and a subscriber see it.
	p.must("Runtime.evaluate", map[string]any{"expression": first + `.querySelector("button.redeliver").click()`}, nil)
	if id := sub.nextID(t); id != "3" {
		t.Fatalf("subscriber got id %q after the redelivery, want 3", id)
	}
	p.waitFor("the redelivery result", first+`.querySelector(".result").textContent === "sent again as #3"`)
	p.waitFor("the redelivery to appear", `document.querySelectorAll("#deliveries li.delivery").length === 3`)
	if got := p.text(`document.querySelector('#deliveries li.delivery[data-id="3"] .guid').textContent`); got != "9a1b2c3d-0000-4000-8000-000000000042" {
		t.Errorf("redelivery's delivery id = %q, want the original's", got)
	}

	// Show the form delivery too, for the screenshot.
	p.must("Runtime.evaluate", map[string]any{"expression": `document.querySelector("#deliveries li.delivery:last-child summary").click()`}, nil)
	p.waitFor("the form payload", `document.querySelector("#deliveries li.delivery:last-child pre.payload")?.textContent.includes("payload = {")`)

	// A body of 1 MiB or more comes by link: listed at once, fetched when
	// it is opened.
	big := `{"action":"edited","pad":"` + strings.Repeat("x", 1<<20) + `"}`
	req, _ = http.NewRequest(http.MethodPost, channel, strings.NewReader(big))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issues")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	large := `document.querySelector('#deliveries li.delivery[data-id="4"]')`
	p.waitFor("the large delivery", large+` !== null`)
	if got := p.text(large + `.querySelector(".size").textContent`); got != "≥ 1 MiB" {
		t.Errorf("large delivery's size shown as %q, want ≥ 1 MiB", got)
	}
	p.must("Runtime.evaluate", map[string]any{"expression": large + `.querySelector("summary").click()`}, nil)
	p.waitFor("the linked payload", large+`.querySelector("pre.payload")?.textContent.includes('"action": "edited"')`)
	p.must("Runtime.evaluate", map[string]any{"expression": large + `.querySelector("summary").click()`}, nil) // closed again, for the screenshot

	// A short name: the page warns that it can be guessed.
	short := b.newPage(800, 600)
	short.must("Page.navigate", map[string]any{"url": base + "/test"}, nil)
	short.waitFor("the guessable-name warning", `document.getElementById("guessable")?.hidden === false`)

	if problems := b.problems(); len(problems) > 0 {
		t.Errorf("the page reported problems:\n%s", strings.Join(problems, "\n"))
	}
	dir := os.Getenv("HOOKLINE_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "hookline-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "relay-page.png")
	if err := p.screenshot(path); err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	t.Logf("screenshot of the relay page: %s", path)
}

// postForm posts a form-encoded GitHub delivery (payload=<JSON>).
func postForm(t *testing.T, channel string) {
	t.Helper()
	form := "payload=%7B%22action%22%3A%22completed%22%2C%22check_run%22%3A%7B%22id%22%3A7%7D%7D"
	req, _ := http.NewRequest(http.MethodPost, channel, strings.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-GitHub-Event", "check_run")
	req.Header.Set("X-GitHub-Delivery", "form-0001")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST form = %d", resp.StatusCode)
	}
}

// lineSubscriber reads a stream's delivery ids.
type lineSubscriber struct{ ids chan string }

func subscribeLines(t *testing.T, channel string) *lineSubscriber {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, channel, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	s := &lineSubscriber{ids: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
				s.ids <- id
			}
		}
		close(s.ids)
	}()
	return s
}

func (s *lineSubscriber) nextID(t *testing.T) string {
	t.Helper()
	select {
	case id, ok := <-s.ids:
		if !ok {
			t.Fatal("subscriber's stream ended")
		}
		return id
	case <-time.After(smeeWait):
		t.Fatalf("no delivery within %s", smeeWait)
	}
	return ""
}

// TestPrivateRelayPageInChromium opens a private channel's page with its
// token in the URL, as /new gives it: the stream connects (EventSource
// carries ?token=), a body sent by link is fetched and a delivery
// redelivered (both with the token as Authorization); without the token the
// relay answers 401 and shows nothing of the channel.
func TestPrivateRelayPageInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: an interop test (chromium)")
	}
	b := startBrowser(t)
	rl := relaytest.Start(t, relay.Options{})
	req, _ := http.NewRequest(http.MethodGet, rl.Base+"/new?private=1", nil)
	req.Header.Set("Accept", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	resp.Body.Close()
	withToken := strings.TrimSpace(line)
	channel, _, ok := strings.Cut(withToken, "?token=")
	if !ok {
		t.Fatalf("GET /new?private=1 answered %q, want a URL with its token", line)
	}
	big := `{"action":"edited","pad":"` + strings.Repeat("x", 1<<20) + `"}`
	if resp, err = http.Post(channel, "application/json", strings.NewReader(big)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	p := b.newPage(1280, 900)
	p.must("Page.navigate", map[string]any{"url": withToken}, nil)
	p.waitFor("the stream to connect", `document.getElementById("status")?.dataset.state === "connected"`)
	large := `document.querySelector('#deliveries li.delivery[data-id="1"]')`
	p.waitFor("the large delivery", large+` !== null`)
	p.must("Runtime.evaluate", map[string]any{"expression": large + `.querySelector("summary").click()`}, nil)
	p.waitFor("the linked payload", large+`.querySelector("pre.payload")?.textContent.includes('"action": "edited"')`)
	p.must("Runtime.evaluate", map[string]any{"expression": large + `.querySelector("button.redeliver").click()`}, nil)
	p.waitFor("the redelivery result", large+`.querySelector(".result").textContent === "sent again as #2"`)

	denied := b.newPage(800, 600)
	denied.must("Page.navigate", map[string]any{"url": channel}, nil)
	denied.waitFor("the relay's refusal", `document.body?.innerText.includes("this channel is private")`)
	if n := denied.text(`String(document.querySelectorAll("#deliveries").length)`); n != "0" {
		t.Errorf("without the token the page shows its delivery list")
	}
	if problems := b.problems(); len(problems) > 0 {
		// The refused page's 401 is the one problem expected.
		for _, pr := range problems {
			if !strings.Contains(pr, "401") {
				t.Errorf("the page reported a problem: %s", pr)
			}
		}
	}
}
