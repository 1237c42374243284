package interop

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/testenv"
)

// A minimal Chrome DevTools Protocol client over --remote-debugging-pipe
// (JSON messages separated by NUL bytes on file descriptors 3 and 4): enough
// to open a page, run script in it and take a screenshot, with no
// dependency beyond Debian's chromium.

// chromium is the headless Chromium the package's tests share, driven over
// its debugging pipe: started by the first test that needs it, stopped by
// TestMain. Each test has a browser context of its own (cdpBrowser), as
// isolated as a separate profile (cookies, storage, cache), and closed when
// the test ends; one process instead of one per test saves its start (about
// 1.7 s of CPU each).
type chromium struct {
	w    io.WriteCloser
	mu   sync.Mutex
	next int
	wait map[int]chan cdpReply

	events chan cdpEvent
	done   chan struct{} // closed when the pipe ends
	stderr *cdpLog
	stop   func()
}

var shared struct {
	once sync.Once
	c    *chromium
	err  error
}

// cdpBrowser is one test's browser context in the shared Chromium.
type cdpBrowser struct {
	t        *testing.T
	c        *chromium
	context  string          // its browserContextId
	sessions map[string]bool // the pages it opened
}

type cdpReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type cdpEvent struct {
	Method    string          `json:"method"`
	Params    json.RawMessage `json:"params"`
	SessionID string          `json:"sessionId"`
}

type cdpLog struct {
	mu sync.Mutex
	b  []byte
}

func (w *cdpLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.b) < 1<<20 {
		w.b = append(w.b, p...)
	}
	return len(p), nil
}

func (w *cdpLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}

// TestMain stops the shared Chromium when the tests end.
func TestMain(m *testing.M) {
	code := m.Run()
	if shared.c != nil {
		shared.c.stop()
	}
	os.Exit(code)
}

// startBrowser gives the test a browser context of its own in the shared
// headless Chromium (see testenv.Chromium), closed when the test ends.
func startBrowser(t *testing.T) *cdpBrowser {
	t.Helper()
	chromiumPath := testenv.Chromium(t, "install it with `sh internal/testutil/testenv/install.sh chromium` or set HOOKLINE_CHROMIUM")
	shared.once.Do(func() { shared.c, shared.err = startChromium(chromiumPath) })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	b := &cdpBrowser{t: t, c: shared.c, sessions: map[string]bool{}}
	var created struct{ BrowserContextID string }
	if err := b.c.call("", "Target.createBrowserContext", map[string]any{}, &created); err != nil {
		t.Fatal(err)
	}
	b.context = created.BrowserContextID
	t.Cleanup(func() {
		if err := b.c.call("", "Target.disposeBrowserContext", map[string]any{"browserContextId": b.context}, nil); err != nil {
			t.Errorf("closing the test's browser context: %v", err)
		}
	})
	return b
}

func startChromium(path string) (*chromium, error) {
	profile, err := os.MkdirTemp("", "hookline-chromium-")
	if err != nil {
		return nil, err
	}
	toChrome, ourWriter, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	ourReader, fromChrome, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, path,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
		"--remote-debugging-pipe", "--user-data-dir="+profile, "--window-size=1280,900",
		"about:blank")
	cmd.ExtraFiles = []*os.File{toChrome, fromChrome} // fds 3 and 4
	c := &chromium{
		w:      ourWriter,
		wait:   map[int]chan cdpReply{},
		events: make(chan cdpEvent, 1024),
		done:   make(chan struct{}),
		stderr: &cdpLog{},
	}
	cmd.Stderr = c.stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("page test: starting chromium: %v", err)
	}
	toChrome.Close()
	fromChrome.Close()
	c.stop = func() {
		ourWriter.Close() // Chromium exits when its pipe closes
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cancel()
			<-exited
		}
		cancel()
		ourReader.Close()
		os.RemoveAll(profile)
	}
	go c.read(ourReader)
	return c, nil
}

func (c *chromium) read(r io.Reader) {
	defer close(c.done)
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		msg, err := br.ReadBytes(0)
		if err != nil {
			return
		}
		msg = msg[:len(msg)-1]
		var head struct {
			ID *int `json:"id"`
		}
		if json.Unmarshal(msg, &head) != nil {
			continue
		}
		if head.ID != nil {
			var reply cdpReply
			json.Unmarshal(msg, &reply)
			c.mu.Lock()
			ch := c.wait[*head.ID]
			delete(c.wait, *head.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- reply
			}
			continue
		}
		var ev cdpEvent
		if json.Unmarshal(msg, &ev) == nil {
			select {
			case c.events <- ev:
			default: // nobody reads events this far behind
			}
		}
	}
}

// call sends a CDP command (to a page session when session is not empty)
// and decodes its result into out (when not nil).
func (c *chromium) call(session, method string, params any, out any) error {
	c.mu.Lock()
	c.next++
	id := c.next
	ch := make(chan cdpReply, 1)
	c.wait[id] = ch
	c.mu.Unlock()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	data, _ := json.Marshal(msg)
	if _, err := c.w.Write(append(data, 0)); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case reply := <-ch:
		if reply.Error != nil {
			return fmt.Errorf("%s: %s (%d)", method, reply.Error.Message, reply.Error.Code)
		}
		if out != nil {
			return json.Unmarshal(reply.Result, out)
		}
		return nil
	case <-c.done:
		return fmt.Errorf("%s: chromium closed its pipe; stderr:\n%s", method, c.stderr.String())
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s: no answer from chromium in 30 s", method)
	}
}

// page is one tab.
type cdpPage struct {
	b       *cdpBrowser
	session string
}

// newPage opens a tab with a viewport of width × height.
func (b *cdpBrowser) newPage(width, height int) *cdpPage {
	b.t.Helper()
	var target struct{ TargetID string }
	if err := b.c.call("", "Target.createTarget", map[string]any{"url": "about:blank", "browserContextId": b.context}, &target); err != nil {
		b.t.Fatal(err)
	}
	var attached struct{ SessionID string }
	if err := b.c.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
		b.t.Fatal(err)
	}
	b.sessions[attached.SessionID] = true
	p := &cdpPage{b: b, session: attached.SessionID}
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable"} {
		p.must(m, map[string]any{}, nil)
	}
	p.must("Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil)
	return p
}

func (p *cdpPage) must(method string, params, out any) {
	p.b.t.Helper()
	if err := p.b.c.call(p.session, method, params, out); err != nil {
		p.b.t.Fatal(err)
	}
}

// eval runs expression in the page (awaiting a promise) and returns its
// value as JSON.
func (p *cdpPage) eval(expression string) (json.RawMessage, error) {
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	err := p.b.c.call(p.session, "Runtime.evaluate", map[string]any{
		"expression": expression, "returnByValue": true, "awaitPromise": true,
	}, &res)
	if err != nil {
		return nil, err
	}
	if e := res.ExceptionDetails; e != nil {
		return nil, fmt.Errorf("%s: %s %s", expression, e.Text, e.Exception.Description)
	}
	return res.Result.Value, nil
}

// waitFor evaluates expression until it is true.
func (p *cdpPage) waitFor(what, expression string) {
	p.b.t.Helper()
	var v []byte
	var err error
	if !testenv.Polled(25*time.Millisecond, func() bool { // the page's state is only looked at
		v, err = p.eval(expression)
		return err == nil && string(v) == "true"
	}) {
		p.b.t.Fatalf("page: waiting for %s (%s): %s %v", what, expression, v, err)
	}
}

// text returns the string value of expression.
func (p *cdpPage) text(expression string) string {
	p.b.t.Helper()
	v, err := p.eval(expression)
	if err != nil {
		p.b.t.Fatal(err)
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		p.b.t.Fatalf("%s = %s, want a string", expression, v)
	}
	return s
}

// screenshot saves a PNG of the viewport to path. The tab is brought to
// the front first: headless Chromium paints only the front tab, and a
// capture of one behind another waits about 30 s for a frame before it
// gives up and paints one.
func (p *cdpPage) screenshot(path string) error {
	if err := p.b.c.call(p.session, "Page.bringToFront", map[string]any{}, nil); err != nil {
		return err
	}
	var shot struct{ Data []byte }
	if err := p.b.c.call(p.session, "Page.captureScreenshot", map[string]any{"format": "png"}, &shot); err != nil {
		return err
	}
	if len(shot.Data) == 0 {
		return errors.New("empty screenshot")
	}
	return os.WriteFile(path, shot.Data, 0o644)
}

// problems returns the JavaScript exceptions and console or network errors
// (CSP violations included) the test's pages reported so far.
func (b *cdpBrowser) problems() []string {
	var out []string
	for {
		select {
		case ev := <-b.c.events:
			if !b.sessions[ev.SessionID] {
				continue // a page of another test's, closed
			}
			switch ev.Method {
			case "Runtime.exceptionThrown":
				out = append(out, "exception: "+string(ev.Params))
			case "Log.entryAdded":
				var e struct {
					Entry struct{ Level, Text, URL string }
				}
				json.Unmarshal(ev.Params, &e)
				if e.Entry.Level == "error" {
					out = append(out, fmt.Sprintf("console error: %s (%s)", e.Entry.Text, e.Entry.URL))
				}
			case "Runtime.consoleAPICalled":
				var e struct{ Type string }
				json.Unmarshal(ev.Params, &e)
				if e.Type == "error" {
					out = append(out, "console.error: "+string(ev.Params))
				}
			}
		default:
			return out
		}
	}
}
