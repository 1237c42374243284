package relay_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/wire"
	"github.com/hookline/hookline/relay"
)

// subscribeLinked opens a stream in hookline's format, which takes large
// bodies by link.
func subscribeLinked(t *testing.T, url string) *stream {
	t.Helper()
	s := subscribe(t, url, wire.StreamHeader, "1")
	s.ready()
	return s
}

// bodyOf returns the exact body of an event in hookline's format: what a
// GET of its bodyLink answers (resolved against channel), or what
// hookline's decoder reads (a JSON body in "body", or bodyB).
func bodyOf(t *testing.T, channel string, ev event) ([]byte, error) {
	t.Helper()
	m := message(t, ev)
	if link, ok := m[wire.KeyBodyLink].(string); ok {
		code, b := fetch(t, channel, link)
		if code != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %d %s", link, code, b)
		}
		return b, nil
	}
	d, err := wire.DecodeDelivery([]byte(ev.Data))
	if err != nil {
		return nil, err
	}
	if !d.BodySource.Exact() {
		return nil, fmt.Errorf("the body came from %q, not an exact source", d.BodySource)
	}
	return d.Body, nil
}

// fetch GETs a bodyLink, resolved against the channel's URL.
func fetch(t *testing.T, channel, link string) (int, []byte) {
	t.Helper()
	base, _ := url.Parse(channel)
	ref, err := url.Parse(link)
	if err != nil || ref.IsAbs() || ref.Host != "" {
		t.Fatalf("bodyLink %q is not a relative reference", link)
	}
	resp, err := http.Get(base.ResolveReference(ref).String())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// A hookline stream gets a large body as "bodyLink", which a GET answers
// with the exact bytes, even once the history let the delivery go, until a
// later link is fetched; small bodies carry bodyB, and smee.io's streams
// never see a link.
func TestBodyByLink(t *testing.T) {
	srv, ts := newRelay(t, relay.Options{HistoryCount: 1})
	channel := ts.URL + "/linked"
	linked := subscribeLinked(t, channel)
	plain := subscribe(t, channel)
	plain.ready()

	big := bytes.Repeat([]byte("ab\r\n\xff"), wire.LinkMin/5+1) // not JSON, not UTF-8
	mustPost(t, channel, string(big), "Content-Type", "application/octet-stream")
	mustPost(t, channel, `{"small":true}`, "Content-Type", "application/json") // id 1 leaves the history

	m := message(t, linked.next())
	link, _ := m[wire.KeyBodyLink].(string)
	if _, hasB := m[wire.KeyBodyB]; link == "" || hasB || m["body"] != nil || m["query"] == nil || m["content-type"] != "application/octet-stream" {
		t.Fatalf("large body's message %v, want bodyLink, no bodyB, no body, with headers and query", m)
	}
	if ev := linked.next(); strings.Contains(ev.Data, `"`+wire.KeyBodyLink+`"`) || !strings.Contains(ev.Data, `"body":{"small":true},`) {
		t.Errorf("small body's message %s, want it in body, no link", ev.Data)
	}
	if m := message(t, plain.next()); m[wire.KeyBodyB] != nil || m[wire.KeyBodyLink] != nil || m["content-type"] != "application/octet-stream" {
		t.Errorf("smee.io's stream got %v, want its shape: no bodyB, no bodyLink", m)
	}
	if st := srv.Stats(); st.PinnedBytes == 0 {
		t.Errorf("stats %+v: the linked delivery, out of the history, should be pinned", st)
	}
	for range 2 { // a fetch cut off can be made again
		if code, got := fetch(t, channel, link); code != http.StatusOK || !bytes.Equal(got, big) {
			t.Fatalf("GET %s = %d, %d bytes; want 200 and the %d bytes posted", link, code, len(got), len(big))
		}
	}

	mustPost(t, channel, string(big), "Content-Type", "application/octet-stream")
	link3, _ := message(t, linked.next())[wire.KeyBodyLink].(string)
	if code, got := fetch(t, channel, link3); code != http.StatusOK || !bytes.Equal(got, big) {
		t.Fatalf("GET %s = %d, %d bytes", link3, code, len(got))
	}
	if code, _ := fetch(t, channel, link); code != http.StatusNotFound {
		t.Errorf("GET %s after a later link = %d, want 404", link, code)
	}
	if st := srv.Stats(); st.PinnedBytes != 0 {
		t.Errorf("stats %+v: nothing should be pinned once a later link was fetched", st)
	}

	u, _ := url.Parse(link3)
	q := u.Query()
	for name, bad := range map[string]string{
		"not an id":       "body/x?" + q.Encode(),
		"another channel": "../other/body/3?" + q.Encode(),
	} {
		if code, _ := fetch(t, channel+"/", bad); code != http.StatusNotFound {
			t.Errorf("%s: GET %s = %d, want 404", name, bad, code)
		}
	}
	// Without the stream's hold, the history answers while it has the
	// delivery (whoever knows the channel's name can read its stream).
	for _, from := range []string{"body/3", "body/3?s=" + url.QueryEscape(srv.NewChannel())} {
		if code, got := fetch(t, channel+"/", from); code != http.StatusOK || !bytes.Equal(got, big) {
			t.Errorf("GET %s of a retained delivery = %d, %d bytes; want 200 and its bytes", from, code, len(got))
		}
	}
	if code, _ := post(t, ts.URL+"/"+link3, "{}"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST on a link = %d, want 405", code)
	}

	// A client whose stream ended before its fetch still gets the body,
	// from the history; once the history lets it go, the link is gone.
	linked.close()
	waitFor(t, "the stream to end", func() bool { return srv.Stats().Subscribers == 1 })
	if code, got := fetch(t, channel, link3); code != http.StatusOK || !bytes.Equal(got, big) {
		t.Errorf("GET %s after its stream ended = %d, %d bytes; want 200 from the history", link3, code, len(got))
	}
	mustPost(t, channel, "{}", "Content-Type", "application/json") // id 3 leaves the history (HistoryCount 1)
	if code, _ := fetch(t, channel, link3); code != http.StatusNotFound {
		t.Errorf("GET %s once the history let it go = %d, want 404", link3, code)
	}
}

// A stream that ends with links not fetched lets their deliveries go.
func TestUnfetchedLinksAreReleased(t *testing.T) {
	srv, ts := newRelay(t, relay.Options{HistoryCount: 1})
	channel := ts.URL + "/unfetched"
	linked := subscribeLinked(t, channel)
	mustPost(t, channel, string(bytes.Repeat([]byte("x"), wire.LinkMin)), "Content-Type", "text/plain")
	mustPost(t, channel, "small", "Content-Type", "text/plain")
	linked.next()
	linked.next()
	if st := srv.Stats(); st.PinnedBytes == 0 {
		t.Fatalf("stats %+v: the linked delivery should be pinned", st)
	}
	linked.close()
	waitFor(t, "the linked delivery to be let go", func() bool { return srv.Stats().PinnedBytes == 0 })
}

// Item: fetches that never read. Bodies being written to stalled fetches
// count, with what only streams hold, against TotalHistoryBytes: past it a
// fetch gets 503 (before, every stalled fetch held its body uncounted for
// up to a minute: one client pinned gigabytes). Concurrent fetches of one
// link share one body; the stream taking the links is not cut for what
// the fetches hold.
func TestStalledBodyFetchesAreCounted(t *testing.T) {
	const size, total = 4 << 20, 16 << 20
	srv, ts := newRelay(t, relay.Options{HistoryCount: 1, TotalHistoryBytes: total})
	channel := ts.URL + "/stalled"
	linked := subscribeLinked(t, channel)
	fetchStalled := func(link string) int {
		conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conn.(*net.TCPConn).SetReadBuffer(4 << 10)
		u, _ := url.Parse(channel)
		ref, _ := url.Parse(link)
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", u.ResolveReference(ref).RequestURI())
		conn.SetReadDeadline(time.Now().Add(wait))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil) // the head only: the body is never read
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode
	}
	codes := map[int]int{}
	for i := range 8 {
		mustPost(t, channel, string(bytes.Repeat([]byte{byte('a' + i)}, size)), "Content-Type", "application/octet-stream")
		link, _ := message(t, linked.next())[wire.KeyBodyLink].(string)
		codes[fetchStalled(link)]++
		codes[fetchStalled(link)]++ // the same link again: one body, shared
	}
	if codes[http.StatusOK] == 0 || codes[http.StatusServiceUnavailable] == 0 {
		t.Errorf("fetch answers %v: want some 200 and, past %d bytes of stalled bodies, 503", codes, total)
	}
	if st := srv.Stats(); st.PinnedBytes+st.FetchBytes > total+size || st.FetchBytes == 0 {
		t.Errorf("stats %+v: pinned and fetched bytes beyond the %d-byte bound (and one body), or no fetch counted", st, total)
	}
}

// A forwarder that fetched a large body whole is not the stream shed cuts
// for it: shed first lets go of the bodies streams keep only in case a
// whole fetch must be made again. (Before, the forwarder held the most and
// was cut, while a stream that never read went on.)
func TestShedDropsWholeFetchesFirst(t *testing.T) {
	const size = 2 << 20
	srv, ts := newRelay(t, relay.Options{HistoryCount: 1, TotalHistoryBytes: 3 << 20})
	channel := ts.URL + "/shed"
	forwarder := subscribeLinked(t, channel)
	stuck, err := dialStream(strings.TrimPrefix(ts.URL, "http://"), "/shed") // never reads
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	waitFor(t, "both streams", func() bool { return srv.Stats().Subscribers == 2 })

	mustPost(t, channel, string(bytes.Repeat([]byte("a"), size)), "Content-Type", "application/octet-stream")
	link, _ := message(t, forwarder.next())[wire.KeyBodyLink].(string)
	if code, got := fetch(t, channel, link); code != http.StatusOK || len(got) != size {
		t.Fatalf("GET %s = %d, %d bytes", link, code, len(got))
	}
	mustPost(t, channel, string(bytes.Repeat([]byte("b"), size)), "Content-Type", "application/octet-stream")
	if m := message(t, forwarder.next()); m[wire.KeyBodyLink] == nil {
		t.Fatalf("the forwarder's stream got %v, want the second body's link", m)
	}
	mustPost(t, channel, "{}", "Content-Type", "application/json") // the second body leaves the history: 4 MiB held by streams alone
	if m := message(t, forwarder.next()); m[wire.KeyBodyLink] != nil || m["body"] == nil {
		t.Fatalf("the forwarder's stream got %v, want the small delivery", m)
	}
	if st := srv.Stats(); st.CutOff != 0 || st.Subscribers != 2 {
		t.Errorf("stats %+v: no stream should be cut for a body the forwarder fetched whole", st)
	}
}

// hookline's one format, whether asked with the header (forward) or the
// query (the page's EventSource): a JSON body that "body" can hold byte for
// byte is written once, with "bodyB": null, and every other body in "bodyB";
// hookline's decoder reads the exact body from either.
func TestExactJSONBodies(t *testing.T) {
	_, ts := newRelay(t, relay.Options{})
	ch := ts.URL + "/exact-json-bodies-channel-0001"
	asks := subscribe(t, ch, wire.StreamHeader, "1")
	asks.ready()
	page := subscribe(t, ch+"?"+wire.StreamQuery+"=1")
	page.ready()
	for _, tt := range []struct {
		name, contentType, body string
		inBody                  bool
	}{
		{"compact JSON", "application/json", `{"action":"opened","n":[1,2.5e3],"s":"\u00e9\\\"x"}`, true},
		{"a +json type", "application/vnd.github+json; charset=utf-8", `[true,null]`, true},
		{"a JSON string", "application/json", `"just text"`, true},
		{"space before", "application/json", ` {"a":1}`, false},
		{"tab after", "application/json", "{\"a\":1}\t", false},
		{"line breaks", "application/json", "{\"a\":\n1}", false},
		{"CR inside", "application/json", "{\"a\":\r1}", false},
		{"not JSON", "application/json", `{"a":`, false},
		{"a form", "application/x-www-form-urlencoded", `payload=%7B%7D`, false},
		{"text", "text/plain", `{"looks":"like JSON"}`, false},
	} {
		mustPost(t, ch, tt.body, "Content-Type", tt.contentType)
		ev := asks.next()
		m := message(t, ev)
		bodyB, hasB := m[wire.KeyBodyB]
		switch {
		case tt.inBody && (!hasB || bodyB != nil):
			t.Errorf("%s: bodyB = %v, want null", tt.name, bodyB)
		case !tt.inBody && bodyB == nil:
			t.Errorf("%s: bodyB is null or missing, want the body in base64", tt.name)
		}
		// What hookline's decoder makes of the event: the exact body.
		d, err := wire.DecodeDelivery([]byte(ev.Data))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if string(d.Body) != tt.body || !d.BodySource.Exact() || d.Format != delivery.FormatHookline {
			t.Errorf("%s: decoded body %q from %q (%s), want %q exactly", tt.name, d.Body, d.BodySource, d.Format, tt.body)
		}
		if ev2 := page.next(); ev2.Data != ev.Data {
			t.Errorf("%s: the query's subscriber got\n%s\nthe header's\n%s\nwant one format", tt.name, ev2.Data, ev.Data)
		}
	}
}
