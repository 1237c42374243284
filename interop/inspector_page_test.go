package interop

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	hldelivery "github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/examples"
	"github.com/hookline/hookline/internal/inspect"
	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/webhooks"
)

// checkFits fails the test when the page scrolls sideways at its width, or
// an element reaches past the window's right edge or its pane's.
func checkFits(t *testing.T, p *cdpPage, when string) {
	t.Helper()
	got := p.text(`(() => {
		const out = [];
		const w = document.documentElement.clientWidth;
		if (document.documentElement.scrollWidth > w) out.push("the page is " + document.documentElement.scrollWidth + " px wide, the window " + w);
		for (const id of ["list-pane", "detail"]) {
			const e = document.getElementById(id);
			if (e.scrollWidth > e.clientWidth + 1) out.push("#" + id + " scrolls sideways: " + e.scrollWidth + " > " + e.clientWidth);
		}
		for (const e of document.querySelectorAll("body *")) {
			const r = e.getBoundingClientRect();
			if (r.width && r.right > w + 1) out.push(e.tagName + (e.id ? "#" + e.id : "") + "." + e.className + " ends at " + Math.round(r.right) + " px");
			if (out.length > 10) break;
		}
		return out.join("\n");
	})()`)
	if got != "" {
		t.Errorf("%s does not fit 1280 px:\n%s", when, got)
	}
}

// TestInspectorInChromium opens forward's inspector in headless Chromium
// while deliveries arrive, their target being @octokit/webhooks'
// createNodeMiddleware (server.mjs), which verifies every signature with
// @octokit/webhooks-methods. Through the DOM: a delivery appears without a
// reload; filtering by event and by "target failed" narrows the list; the
// detail shows the target's status, an answer header and the answer's body;
// replay makes a new attempt with the target's new answer; an edited JSON
// body replayed (signed again) passes octokit's verification. Requests
// with a foreign Host or Origin are refused. The screenshot is the
// README's (HOOKLINE_ARTIFACTS=docs to write it there).
func TestInspectorInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: an interop test (chromium, node)")
	}
	node := requireNode(t)
	target := startOctokit(t, node) + "/api/github/webhooks"
	b := startBrowser(t)

	var client *proxy.Client
	in := inspect.New(inspect.Options{Secret: secret, TargetURL: target,
		Resend: func(ctx context.Context, d *hldelivery.Delivery) proxy.Result { return client.Handle(ctx, d) }})
	client, err := proxy.New(proxy.Options{Targets: []proxy.Target{{URL: target}}, Secret: secret, OnResult: in.Add, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go in.Serve(t.Context(), ln)
	base := "http://" + ln.Addr().String()
	deliver := func(id, name string, body []byte) {
		t.Helper()
		event, _, _ := strings.Cut(name, ".")
		sig, _ := webhooks.Sign(secret, body)
		client.Handle(t.Context(), &hldelivery.Delivery{ID: id, Event: event, BodySource: hldelivery.BodyBase64, Body: body,
			Headers: http.Header{"X-Github-Delivery": {id}, "X-Github-Event": {event}, "Content-Type": {"application/json"}, "X-Hub-Signature-256": {sig}}})
	}
	example := func(name string) []byte {
		body, ok := examples.Payload(name)
		if !ok {
			t.Fatalf("no example %s", name)
		}
		return body
	}

	// The most common laptop width.
	p := b.newPage(1280, 800)
	p.must("Page.navigate", map[string]any{"url": inspect.URL(ln, in.Token())}, nil)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("page problems: %v", b.problems())
		}
	})
	p.waitFor("the empty list", `document.getElementById("empty")?.hidden === false`)
	if hint := p.text(`document.getElementById("detail").innerText`); !strings.Contains(hint, "Choose a delivery") {
		t.Errorf("the empty detail pane says %q, want a hint", hint)
	}
	rows := `document.querySelectorAll("#list tbody tr").length`

	deliver("9a1b2c3d-0001", "issues.opened", example("issues.opened"))
	p.waitFor("the first delivery, live", rows+` === 1`)
	deliver("9a1b2c3d-0002", "pull_request.opened", example("pull_request.opened"))
	// octokit's handler throws on "interop": "fail": a 500.
	deliver("9a1b2c3d-0003", "push", []byte(`{"ref":"refs/heads/main","interop":"fail","repository":{"full_name":"octo-org/hello-world"},"sender":{"login":"octocat"}}`))
	deliver("9a1b2c3d-0004", "issue_comment.created", example("issue_comment.created"))
	p.waitFor("four deliveries, live", rows+` === 4`)

	// Filters narrow the list.
	p.must("Runtime.evaluate", map[string]any{"expression": `(() => { const s = document.getElementById("event"); s.value = "push"; s.dispatchEvent(new Event("change")); })()`}, nil)
	p.waitFor("the push filter", rows+` === 1 && document.querySelector("#list tbody tr td.event").textContent.startsWith("push")`)
	p.must("Runtime.evaluate", map[string]any{"expression": `(() => { const s = document.getElementById("event"); s.value = ""; s.dispatchEvent(new Event("change")); const o = document.getElementById("outcome"); o.value = "target-failed"; o.dispatchEvent(new Event("change")); })()`}, nil)
	p.waitFor("the target-failed filter", rows+` === 1 && document.querySelector("#list tbody tr td.id").title === "9a1b2c3d-0003"`)
	p.must("Runtime.evaluate", map[string]any{"expression": `(() => { const o = document.getElementById("outcome"); o.value = ""; o.dispatchEvent(new Event("change")); })()`}, nil)
	p.waitFor("the whole list again", rows+` === 4`)

	// The failed one's detail: the target's status, a header, its answer.
	p.must("Runtime.evaluate", map[string]any{"expression": `[...document.querySelectorAll("#list tbody tr")].find(r => r.querySelector("td.id").title === "9a1b2c3d-0003").click()`}, nil)
	p.waitFor("the detail", `document.querySelector("#detail .answer-body") !== null`)
	detail := p.text(`document.getElementById("detail").innerText`)
	for _, want := range []string{"answer 500", "target failed", "GitHub would record this delivery as failed"} {
		if !strings.Contains(detail, want) {
			t.Errorf("the failed delivery's detail lacks %q:\n%s", want, detail)
		}
	}
	if h := p.text(`document.querySelector("#detail .answer-headers").innerText`); !strings.Contains(strings.ToLower(h), "content-type") {
		t.Errorf("answer headers = %q, want Content-Type among them", h)
	}
	if body := p.text(`document.querySelector("#detail .answer-body").innerText`); !strings.Contains(body, "interop: handler failed") {
		t.Errorf("answer body = %q, want octokit's error", body)
	}
	// The trace's words and clock: 24-hour, and where the body came from
	// said in words, not the relay's field names.
	if row := p.text(`document.querySelector("#list tbody tr td").textContent`); !regexp.MustCompile(`^\d\d:\d\d:\d\d$`).MatchString(row) {
		t.Errorf("the list's time = %q, want HH:MM:SS (24-hour, as the trace)", row)
	}
	for _, internal := range []string{"bodyB", "body-exact", "body from"} {
		if strings.Contains(detail, internal) {
			t.Errorf("the detail shows the internal word %q:\n%s", internal, detail)
		}
	}
	checkFits(t, p, "the list and a failed delivery's detail")

	// A link to one delivery opens it.
	link := p.text(`document.querySelector("#detail a.permalink").getAttribute("href")`)
	p.must("Runtime.evaluate", map[string]any{"expression": `location.hash = "#/deliveries/1"`}, nil)
	p.waitFor("the linked delivery", `document.querySelector("#list tbody tr.selected td.id")?.title === "9a1b2c3d-0001"`)
	p.must("Runtime.evaluate", map[string]any{"expression": `location.hash = ` + strconv.Quote(link)}, nil)
	p.waitFor("the failed one again, by its link", `document.querySelector("#list tbody tr.selected td.id")?.title === "9a1b2c3d-0003"`)

	// Keyboard: k moves to the newer one, j back.
	p.must("Input.dispatchKeyEvent", map[string]any{"type": "keyDown", "key": "k", "text": "k"}, nil)
	p.waitFor("k to select the newer delivery", `document.querySelector("#list tbody tr.selected td.id")?.title === "9a1b2c3d-0004"`)

	// Replay the selected one (r): a new attempt, octokit's 200.
	p.must("Input.dispatchKeyEvent", map[string]any{"type": "keyDown", "key": "r", "text": "r"}, nil)
	p.waitFor("the replay", rows+` === 5 && document.querySelector("#detail h2").textContent.includes("replay of")`)
	if got := p.text(`document.querySelector("#detail table td.s2")?.textContent || ""`); got != "200" {
		t.Errorf("the replay's attempt status = %q, want 200", got)
	}

	// Edit the JSON body and replay it: signed again, octokit verifies it.
	p.must("Runtime.evaluate", map[string]any{"expression": `document.getElementById("edit").click()`}, nil)
	p.waitFor("the edit form", `document.getElementById("edit-body") !== null`)
	checkFits(t, p, "the edit form")
	// Sent as it is, an edit is refused with a note (before: replayed
	// unchanged, marked "edited").
	p.must("Runtime.evaluate", map[string]any{"expression": `document.getElementById("edit-send").click()`}, nil)
	p.waitFor("the note that nothing is edited", `document.getElementById("edit-note")?.textContent.includes("Nothing is edited")`)
	if n := p.text(`String(document.querySelectorAll("#list tbody tr").length)`); n != "5" {
		t.Errorf("an edit that changed nothing was replayed: %s rows, want 5", n)
	}
	p.must("Runtime.evaluate", map[string]any{"expression": `(() => { const t = document.getElementById("edit-body"); const v = JSON.parse(t.value); v.comment.body = "Edited in the inspector"; t.value = JSON.stringify(v); document.getElementById("edit-send").click(); })()`}, nil)
	p.waitFor("the edited replay", rows+` === 6 && document.querySelector("#detail h2 .edited") !== null`)
	if got := p.text(`document.querySelector("#detail table td.s2")?.textContent || document.getElementById("detail").innerText`); got != "200" {
		t.Errorf("octokit answered the edited replay with %q, want 200 (its signature verified)", got)
	}
	if body := p.text(`document.querySelector("#detail .request-body pre.raw").textContent`); !strings.Contains(body, "Edited in the inspector") {
		t.Errorf("the edited request body = %q", body)
	}
	if marked := p.text(`document.querySelector("#list tbody tr").innerText`); !strings.Contains(marked, "edited") {
		t.Errorf("the list does not mark the edited replay: %q", marked)
	}

	// A foreign Host (DNS rebinding) or Origin is refused.
	req, _ := http.NewRequest("GET", base+"/api/deliveries", nil)
	req.Host = "attacker.example:" + strings.Split(ln.Addr().String(), ":")[1]
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("a foreign Host: %v %v, want 421", resp, err)
	}
	req, _ = http.NewRequest("DELETE", base+"/api/deliveries", nil)
	req.Header.Set("X-Hookline-Token", in.Token())
	req.Header.Set("Origin", "http://attacker.example")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a foreign Origin: %v %v, want 403", resp, err)
	} else {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	if problems := b.problems(); len(problems) > 0 {
		t.Errorf("the page reported problems:\n%s", strings.Join(problems, "\n"))
	}
	// The README's picture: the failed delivery's detail.
	p.must("Runtime.evaluate", map[string]any{"expression": `[...document.querySelectorAll("#list tbody tr")].find(r => r.querySelector("td.id").title === "9a1b2c3d-0003").click()`}, nil)
	p.waitFor("the detail again", `document.querySelector("#detail .answer-body")?.innerText.includes("interop")`)
	dir := os.Getenv("HOOKLINE_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "hookline-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "inspector.png")
	if err := p.screenshot(path); err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	t.Logf("screenshot of the inspector: %s", path)
}
