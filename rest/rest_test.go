package rest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/rest"
)

// seen is what a test server received.
type seen struct {
	Method   string
	Host     string
	Path     string
	RawQuery string
	Header   http.Header
	Body     string
}

// recorder records the requests a server handles.
type recorder struct {
	mu   sync.Mutex
	reqs []seen
}

func (rec *recorder) requests() []seen {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]seen(nil), rec.reqs...)
}

func (rec *recorder) count() int { return len(rec.requests()) }

// startServer starts a local server that records each request (body
// included) and then calls h. It is closed when the test ends.
func startServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *recorder) {
	t.Helper()
	rec := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("server: reading request body: %v", err)
		}
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, seen{
			Method:   r.Method,
			Host:     r.Host,
			Path:     r.URL.Path,
			RawQuery: r.URL.RawQuery,
			Header:   r.Header.Clone(),
			Body:     string(body),
		})
		rec.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, rec
}

// hijack writes raw to the connection behind w and closes it.
func hijack(t *testing.T, w http.ResponseWriter, raw string) {
	t.Helper()
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		t.Errorf("server: hijack: %v", err)
		return
	}
	defer conn.Close()
	if _, err := buf.WriteString(raw); err != nil {
		t.Errorf("server: write: %v", err)
	}
	if err := buf.Flush(); err != nil {
		t.Errorf("server: flush: %v", err)
	}
}

// only returns the single request rec saw, failing the test otherwise.
func only(t *testing.T, rec *recorder) seen {
	t.Helper()
	reqs := rec.requests()
	if len(reqs) != 1 {
		t.Fatalf("server saw %d requests, want 1", len(reqs))
	}
	return reqs[0]
}

func TestSendRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		method      rest.Method
		path        string // appended to the server URL to make BaseURL
		headers     map[string]string
		query       map[string]string
		body        []byte
		wantMethod  string
		wantPath    string
		wantQuery   string // raw query the server received
		wantHost    string // if empty, the server's address
		wantCType   []string
		wantHeaders map[string][]string
		wantBody    string
	}{
		{
			name: "GET without body", method: rest.Get, path: "/your/api/myparam/call",
			wantMethod: "GET", wantPath: "/your/api/myparam/call",
		},
		{
			name: "empty Method is GET", path: "/x",
			wantMethod: "GET", wantPath: "/x",
		},
		{
			name: "JSON body gets default Content-Type", method: rest.Post, path: "/x",
			body:       []byte(`{"some": 0, "awesome": 1}`),
			wantMethod: "POST", wantPath: "/x", wantCType: []string{"application/json"},
			wantBody: `{"some": 0, "awesome": 1}`,
		},
		{
			name: "caller Content-Type with lower-case name is kept", method: rest.Post, path: "/x",
			headers:    map[string]string{"content-type": "text/plain; charset=utf-8"},
			body:       []byte("hello"),
			wantMethod: "POST", wantPath: "/x", wantCType: []string{"text/plain; charset=utf-8"},
			wantBody: "hello",
		},
		{
			name: "caller Content-Type without body is sent", method: rest.Put, path: "/x",
			headers:    map[string]string{"Content-Type": "application/xml"},
			wantMethod: "PUT", wantPath: "/x", wantCType: []string{"application/xml"},
		},
		{
			name: "no body, no Content-Type", method: rest.Post, path: "/x",
			wantMethod: "POST", wantPath: "/x",
		},
		{
			name: "empty body, no Content-Type", method: rest.Post, path: "/x", body: []byte{},
			wantMethod: "POST", wantPath: "/x",
		},
		{
			name: "every header is sent", method: rest.Get, path: "/x",
			headers: map[string]string{
				"Authorization": "Bearer secret-key",
				"X-Test":        "Test",
				"x-lower-case":  "v",
				"X-Empty":       "",
				"User-Agent":    "hookline-test/1",
			},
			wantMethod: "GET", wantPath: "/x",
			wantHeaders: map[string][]string{
				"Authorization": {"Bearer secret-key"},
				"X-Test":        {"Test"},
				"X-Lower-Case":  {"v"},
				"X-Empty":       {""},
				"User-Agent":    {"hookline-test/1"},
			},
		},
		{
			name: "Host header sets the request host", method: rest.Get, path: "/x",
			headers:    map[string]string{"Host": "api.example.test"},
			wantMethod: "GET", wantPath: "/x", wantHost: "api.example.test",
		},
		{
			name: "query params", method: rest.Get, path: "/x",
			query:      map[string]string{"world": "1", "hello": "0"},
			wantMethod: "GET", wantPath: "/x", wantQuery: "hello=0&world=1",
		},
		{
			name: "query merged with BaseURL query", method: rest.Get, path: "/x?existing=1&keep=a%20b",
			query:      map[string]string{"added": "2"},
			wantMethod: "GET", wantPath: "/x", wantQuery: "existing=1&keep=a%20b&added=2",
		},
		{
			name: "query param replaces the same name in BaseURL", method: rest.Get, path: "/x?page=1&sort=asc&page=3",
			query:      map[string]string{"page": "2"},
			wantMethod: "GET", wantPath: "/x", wantQuery: "sort=asc&page=2",
		},
		{
			name: "BaseURL query kept without params", method: rest.Get, path: "/x?a=1&b=%2F",
			wantMethod: "GET", wantPath: "/x", wantQuery: "a=1&b=%2F",
		},
		{
			name: "special characters are escaped", method: rest.Get, path: "/x",
			query:      map[string]string{"q": "a b&c=d/é", "k&y": "v"},
			wantMethod: "GET", wantPath: "/x", wantQuery: "k%26y=v&q=a+b%26c%3Dd%2F%C3%A9",
		},
		{
			name: "fragment is not sent", method: rest.Get, path: "/x?a=1#frag",
			query:      map[string]string{"b": "2"},
			wantMethod: "GET", wantPath: "/x", wantQuery: "a=1&b=2",
		},
		{
			name: "binary body sent exactly", method: rest.Patch, path: "/x",
			headers:    map[string]string{"Content-Type": "application/octet-stream"},
			body:       []byte{0x00, 0xff, '\r', '\n', '{', 0x80},
			wantMethod: "PATCH", wantPath: "/x", wantCType: []string{"application/octet-stream"},
			wantBody: "\x00\xff\r\n{\x80",
		},
		{
			name: "DELETE with query", method: rest.Delete, path: "/your/api/myparam/call",
			query:      map[string]string{"limit": "100", "offset": "0"},
			wantMethod: "DELETE", wantPath: "/your/api/myparam/call", wantQuery: "limit=100&offset=0",
		},
		{
			name: "OPTIONS", method: rest.Options, path: "/x",
			wantMethod: "OPTIONS", wantPath: "/x",
		},
	}
	for _, tc := range tests {
		tc := tc // a copy per iteration: the module is Go 1.14
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, rec := startServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Reply", "yes")
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, "created")
			})
			req := rest.Request{
				Method: tc.method, BaseURL: srv.URL + tc.path,
				Headers: tc.headers, QueryParams: tc.query, Body: tc.body,
			}
			call := string(tc.method) + " " + req.BaseURL
			resp, err := rest.SendWithContext(t.Context(), req)
			if err != nil {
				t.Fatalf("Send(%q) error = %v, want nil", call, err)
			}
			if resp.StatusCode != 201 || resp.Body != "created" || !reflect.DeepEqual(resp.Headers["X-Reply"], []string{"yes"}) {
				t.Errorf("Send(%q) = %d %q %v, want 201 %q X-Reply [yes]", call, resp.StatusCode, resp.Body, resp.Headers, "created")
			}

			got := only(t, rec)
			if got.Method != tc.wantMethod {
				t.Errorf("Send(%q): server saw method %q, want %q", call, got.Method, tc.wantMethod)
			}
			if got.Path != tc.wantPath {
				t.Errorf("Send(%q): server saw path %q, want %q", call, got.Path, tc.wantPath)
			}
			if got.RawQuery != tc.wantQuery {
				t.Errorf("Send(%q): server saw query %q, want %q", call, got.RawQuery, tc.wantQuery)
			}
			wantHost := tc.wantHost
			if wantHost == "" {
				wantHost = strings.TrimPrefix(srv.URL, "http://")
			}
			if got.Host != wantHost {
				t.Errorf("Send(%q): server saw host %q, want %q", call, got.Host, wantHost)
			}
			if ct := got.Header.Values("Content-Type"); !reflect.DeepEqual(ct, tc.wantCType) {
				t.Errorf("Send(%q): server saw Content-Type %q, want %q", call, ct, tc.wantCType)
			}
			for name, want := range tc.wantHeaders {
				if v := got.Header[name]; !reflect.DeepEqual(v, want) {
					t.Errorf("Send(%q): server saw %s %q, want %q", call, name, v, want)
				}
			}
			if got.Body != tc.wantBody {
				t.Errorf("Send(%q): server saw body %q, want %q", call, got.Body, tc.wantBody)
			}
		})
	}
}

func TestSendSpecialCharactersRoundTrip(t *testing.T) {
	t.Parallel()
	var got []string
	srv, _ := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.Query()["q"]
	})
	req := rest.Request{Method: rest.Get, BaseURL: srv.URL + "/x?q=first", QueryParams: map[string]string{"q": "a b&c=d/é+%"}}
	if _, err := rest.SendWithContext(t.Context(), req); err != nil {
		t.Fatalf("Send(%q) error = %v", req.BaseURL, err)
	}
	if want := []string{"a b&c=d/é+%"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Send(%q): server decoded q = %q, want %q", req.BaseURL, got, want)
	}
}

func TestSendNon2xxIsData(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		body   string
	}{
		{"302 without Location", 302, "moved?"},
		{"400", 400, `{"errors":[{"message":"bad"}]}`},
		{"404", 404, "not found"},
		{"500", 500, "boom"},
		{"503", 503, ""},
	}
	for _, tc := range tests {
		tc := tc // a copy per iteration: the module is Go 1.14
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, rec := startServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			resp, err := rest.SendWithContext(t.Context(), rest.Request{Method: rest.Get, BaseURL: srv.URL})
			if err != nil {
				t.Fatalf("Send(%q) error = %v, want nil", srv.URL, err)
			}
			if resp.StatusCode != tc.status || resp.Body != tc.body {
				t.Errorf("Send(%q) = %d %q, want %d %q", srv.URL, resp.StatusCode, resp.Body, tc.status, tc.body)
			}
			if n := rec.count(); n != 1 {
				t.Errorf("Send(%q): server saw %d requests, want 1 (no retry without a policy)", srv.URL, n)
			}
		})
	}
}

func TestSendHeadReadsNoBody(t *testing.T) {
	t.Parallel()
	srv, rec := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.Header().Set("X-Total", "7")
	})
	// The limit is far below the announced length: a HEAD response body is
	// never read, so it cannot be too large.
	c := &rest.Client{MaxResponseBytes: 10}
	resp, err := c.SendWithContext(t.Context(), rest.Request{Method: rest.Head, BaseURL: srv.URL})
	if err != nil {
		t.Fatalf("Send(HEAD %q) error = %v, want nil", srv.URL, err)
	}
	if resp.StatusCode != 200 || resp.Body != "" {
		t.Errorf("Send(HEAD %q) = %d %q, want 200 %q", srv.URL, resp.StatusCode, resp.Body, "")
	}
	if got := resp.Headers["Content-Length"]; !reflect.DeepEqual(got, []string{"1000"}) {
		t.Errorf("Send(HEAD %q) Content-Length = %q, want [1000]", srv.URL, got)
	}
	if got := only(t, rec).Method; got != "HEAD" {
		t.Errorf("Send(HEAD %q): server saw %q, want HEAD", srv.URL, got)
	}
}

func TestSendRedirectKeepsBody(t *testing.T) {
	t.Parallel()
	for _, code := range []int{307, 308} {
		code := code // a copy per iteration: the module is Go 1.14
		t.Run(http.StatusText(code), func(t *testing.T) {
			t.Parallel()
			srv, rec := startServer(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/old" {
					http.Redirect(w, r, "/new", code)
					return
				}
				io.WriteString(w, "arrived")
			})
			req := rest.Request{Method: rest.Post, BaseURL: srv.URL + "/old", Body: []byte(`{"keep":"me"}`)}
			resp, err := rest.SendWithContext(t.Context(), req)
			if err != nil {
				t.Fatalf("Send(%q) error = %v", req.BaseURL, err)
			}
			if resp.StatusCode != 200 || resp.Body != "arrived" {
				t.Errorf("Send(%q) = %d %q, want 200 %q", req.BaseURL, resp.StatusCode, resp.Body, "arrived")
			}
			reqs := rec.requests()
			if len(reqs) != 2 {
				t.Fatalf("server saw %d requests, want 2", len(reqs))
			}
			got := reqs[1]
			if got.Method != "POST" || got.Path != "/new" || got.Body != `{"keep":"me"}` || got.Header.Get("Content-Type") != "application/json" {
				t.Errorf("after %d, server saw %s %s %q (Content-Type %q), want POST /new %q (application/json)",
					code, got.Method, got.Path, got.Body, got.Header.Get("Content-Type"), `{"keep":"me"}`)
			}
		})
	}
}

func TestSendBodyCutShort(t *testing.T) {
	t.Parallel()
	srv, _ := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		hijack(t, w, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nContent-Type: text/plain\r\n\r\npartial")
	})
	resp, err := rest.SendWithContext(t.Context(), rest.Request{Method: rest.Get, BaseURL: srv.URL + "/x"})
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Send(%q) = %v, %v; want error wrapping io.ErrUnexpectedEOF", srv.URL, resp, err)
	}
	if resp != nil {
		t.Errorf("Send(%q) response = %v, want nil with an error", srv.URL, resp)
	}
	want := "rest: GET " + srv.URL + "/x: reading response body: unexpected EOF"
	if err.Error() != want {
		t.Errorf("Send(%q) error = %q, want %q", srv.URL, err, want)
	}
}

func TestSendResponseLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		limit   int64
		handler http.HandlerFunc
		wantLen int
		wantErr error
	}{
		{
			name: "Content-Length over limit", limit: 16,
			handler: func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "12345678901234567") },
			wantErr: rest.ErrResponseTooLarge,
		},
		{
			name: "chunked over limit", limit: 16,
			handler: func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "12345678")
				w.(http.Flusher).Flush()
				io.WriteString(w, "123456789")
			},
			wantErr: rest.ErrResponseTooLarge,
		},
		{
			name: "exactly at limit", limit: 16,
			handler: func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "1234567890123456") },
			wantLen: 16,
		},
		{
			name: "chunked at limit", limit: 16,
			handler: func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "12345678")
				w.(http.Flusher).Flush()
				io.WriteString(w, "12345678")
			},
			wantLen: 16,
		},
		{
			name: "negative limit means none", limit: -1,
			handler: func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, strings.Repeat("x", 100000)) },
			wantLen: 100000,
		},
		{
			name: "zero limit means 32 MiB: 32 MiB + 1 announced", limit: 0,
			handler: func(w http.ResponseWriter, r *http.Request) {
				hijack(t, w, "HTTP/1.1 200 OK\r\nContent-Length: 33554433\r\n\r\n")
			},
			wantErr: rest.ErrResponseTooLarge,
		},
	}
	for _, tc := range tests {
		tc := tc // a copy per iteration: the module is Go 1.14
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := startServer(t, tc.handler)
			c := &rest.Client{MaxResponseBytes: tc.limit}
			resp, err := c.SendWithContext(t.Context(), rest.Request{Method: rest.Get, BaseURL: srv.URL})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Send(%q) with limit %d error = %v, want %v", srv.URL, tc.limit, err, tc.wantErr)
			}
			if tc.wantErr != nil {
				if resp != nil {
					t.Errorf("Send(%q) response = %v, want nil with an error", srv.URL, resp)
				}
				return
			}
			if len(resp.Body) != tc.wantLen {
				t.Errorf("Send(%q) with limit %d: body length = %d, want %d", srv.URL, tc.limit, len(resp.Body), tc.wantLen)
			}
		})
	}
}

func TestSendResponseLimitMessage(t *testing.T) {
	t.Parallel()
	srv, _ := startServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "too long") })
	c := &rest.Client{MaxResponseBytes: 4}
	_, err := c.SendWithContext(t.Context(), rest.Request{Method: rest.Get, BaseURL: srv.URL + "/big?token=secret"})
	want := "rest: GET " + srv.URL + "/big: response body exceeds the 4-byte limit (Client.MaxResponseBytes); raise the limit, or use MakeRequest to stream the body"
	if err == nil || err.Error() != want {
		t.Errorf("Send(%q) error = %v, want %q", srv.URL, err, want)
	}
}

func TestSendInvalidInput(t *testing.T) {
	t.Parallel()
	srv, rec := startServer(t, func(w http.ResponseWriter, r *http.Request) {})
	hostPort := strings.TrimPrefix(srv.URL, "http://")
	tests := []struct {
		name    string
		req     rest.Request
		wantErr error
		wantMsg string
	}{
		{
			name:    "method with a space",
			req:     rest.Request{Method: "G ET", BaseURL: srv.URL},
			wantErr: rest.ErrInvalidMethod,
			wantMsg: `rest: method "G ET" is not a valid HTTP method; use one of rest.Get, rest.Post, rest.Put, rest.Patch, rest.Delete, rest.Head, rest.Options`,
		},
		{
			name:    "method @",
			req:     rest.Request{Method: "@", BaseURL: srv.URL},
			wantErr: rest.ErrInvalidMethod,
			wantMsg: `rest: method "@" is not a valid HTTP method; use one of rest.Get, rest.Post, rest.Put, rest.Patch, rest.Delete, rest.Head, rest.Options`,
		},
		{
			name:    "empty BaseURL",
			req:     rest.Request{Method: rest.Get},
			wantErr: rest.ErrInvalidURL,
			wantMsg: "rest: BaseURL is empty; set it to a complete URL such as https://api.example.com/v3/resource",
		},
		{
			name:    "localhost without scheme",
			req:     rest.Request{Method: rest.Get, BaseURL: "localhost:3000"},
			wantErr: rest.ErrInvalidURL,
			wantMsg: `rest: BaseURL "localhost:3000" has no scheme; did you mean http://localhost:3000?`,
		},
		{
			name:    "server address without scheme",
			req:     rest.Request{Method: rest.Post, BaseURL: hostPort + "/hook", Body: []byte("{}")},
			wantErr: rest.ErrInvalidURL,
			wantMsg: `rest: BaseURL "` + hostPort + `/hook" has no scheme; did you mean http://` + hostPort + `/hook?`,
		},
		{
			name:    "domain without scheme",
			req:     rest.Request{Method: rest.Get, BaseURL: "api.example.com/v3/x"},
			wantErr: rest.ErrInvalidURL,
			wantMsg: `rest: BaseURL "api.example.com/v3/x" has no scheme; did you mean https://api.example.com/v3/x?`,
		},
		{
			name:    "scheme-relative",
			req:     rest.Request{Method: rest.Get, BaseURL: "//api.example.com/x"},
			wantErr: rest.ErrInvalidURL,
			wantMsg: `rest: BaseURL "//api.example.com/x" has no scheme; did you mean https://api.example.com/x?`,
		},
		{
			name:    "path only",
			req:     rest.Request{Method: rest.Get, BaseURL: "/v3/x"},
			wantErr: rest.ErrInvalidURL,
			wantMsg: `rest: BaseURL "/v3/x" has no scheme and host; set it to a complete URL such as https://api.example.com/v3/x`,
		},
		{
			name:    "unsupported scheme",
			req:     rest.Request{Method: rest.Get, BaseURL: "ftp://example.com/x"},
			wantErr: rest.ErrInvalidURL,
			wantMsg: `rest: BaseURL "ftp://example.com/x" has scheme "ftp"; only http and https are supported`,
		},
		{
			name:    "no host",
			req:     rest.Request{Method: rest.Get, BaseURL: "http:///x"},
			wantErr: rest.ErrInvalidURL,
			wantMsg: `rest: BaseURL "http:///x" has no host; write it as http://host/path`,
		},
		{
			name:    "space in host",
			req:     rest.Request{Method: rest.Get, BaseURL: "http://exa mple.com/"},
			wantErr: rest.ErrInvalidURL,
			wantMsg: `rest: BaseURL "http://exa mple.com/" is not a valid URL (invalid character " " in host name); percent-encode spaces and special characters`,
		},
		{
			name:    "control character in path",
			req:     rest.Request{Method: rest.Get, BaseURL: srv.URL + "/a\nb"},
			wantErr: rest.ErrInvalidURL,
			wantMsg: `rest: BaseURL "` + srv.URL + `/a\nb" is not a valid URL (net/url: invalid control character in URL); percent-encode spaces and special characters`,
		},
		{
			name:    "header name with a space",
			req:     rest.Request{Method: rest.Get, BaseURL: srv.URL, Headers: map[string]string{"Bad Header": "x"}},
			wantErr: rest.ErrInvalidHeader,
			wantMsg: `rest: header name "Bad Header" is not a valid HTTP header name; remove spaces, colons and other separators`,
		},
		{
			name:    "header value with CRLF, value not echoed",
			req:     rest.Request{Method: rest.Get, BaseURL: srv.URL, Headers: map[string]string{"X-Inject": "secret\r\nX-Evil: 1"}},
			wantErr: rest.ErrInvalidHeader,
			wantMsg: `rest: header "X-Inject" has a value with a control character (such as CR or LF); remove it`,
		},
	}
	for _, tc := range tests {
		tc := tc // a copy per iteration: the module is Go 1.14
		t.Run(tc.name, func(t *testing.T) {
			resp, err := rest.SendWithContext(t.Context(), tc.req)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Send(%q) error = %v, want %v", tc.req.BaseURL, err, tc.wantErr)
			}
			if err.Error() != tc.wantMsg {
				t.Errorf("Send(%q) error = %q, want %q", tc.req.BaseURL, err, tc.wantMsg)
			}
			if resp != nil {
				t.Errorf("Send(%q) response = %v, want nil", tc.req.BaseURL, resp)
			}
			req, err := rest.BuildRequestObject(tc.req)
			if req != nil || !errors.Is(err, tc.wantErr) {
				t.Errorf("BuildRequestObject(%q) = %v, %v; want nil, %v", tc.req.BaseURL, req, err, tc.wantErr)
			}
		})
	}
	// Subtests are not parallel, so every Send has returned.
	if n := rec.count(); n != 0 {
		t.Errorf("server saw %d requests for invalid input, want 0", n)
	}
}

func TestSendContext(t *testing.T) {
	t.Parallel()
	srv, _ := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // answer only when the client gives up
	})
	tests := []struct {
		name    string
		ctx     func(t *testing.T) context.Context
		wantErr error
	}{
		{
			name: "canceled before sending",
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				return ctx
			},
			wantErr: context.Canceled,
		},
		{
			name: "deadline while waiting for the response",
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
				t.Cleanup(cancel)
				return ctx
			},
			wantErr: context.DeadlineExceeded,
		},
	}
	for _, tc := range tests {
		tc := tc // a copy per iteration: the module is Go 1.14
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp, err := rest.SendWithContext(tc.ctx(t), rest.Request{Method: rest.Get, BaseURL: srv.URL})
			if !errors.Is(err, tc.wantErr) || resp != nil {
				t.Errorf("SendWithContext(%q) = %v, %v; want nil, %v", srv.URL, resp, err, tc.wantErr)
			}
		})
	}
}

func TestSendNilContext(t *testing.T) {
	t.Parallel()
	srv, _ := startServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	//lint:ignore SA1012 a nil context is documented to mean context.Background
	resp, err := rest.SendWithContext(nil, rest.Request{Method: rest.Get, BaseURL: srv.URL})
	if err != nil || resp.Body != "ok" {
		t.Errorf("SendWithContext(nil, %q) = %v, %v; want body %q", srv.URL, resp, err, "ok")
	}
}

func TestClientTimeout(t *testing.T) {
	t.Parallel()
	if got, want := rest.DefaultClient.HTTPClient.Timeout, 30*time.Second; got != want {
		t.Errorf("DefaultClient.HTTPClient.Timeout = %v, want %v", got, want)
	}
	if got, want := rest.DefaultHTTPClientTimeout, 30*time.Second; got != want {
		t.Errorf("timeout of the client used when HTTPClient is nil = %v, want %v", got, want)
	}
	srv, _ := startServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	c := &rest.Client{HTTPClient: &http.Client{Timeout: 20 * time.Millisecond}}
	_, err := c.SendWithContext(t.Context(), rest.Request{Method: rest.Get, BaseURL: srv.URL})
	if err == nil || !strings.Contains(err.Error(), "Client.Timeout exceeded") {
		t.Errorf("Send(%q) with a 20ms timeout error = %v, want a Client.Timeout error", srv.URL, err)
	}
}

func TestZeroAndNilClient(t *testing.T) {
	t.Parallel()
	srv, _ := startServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	var nilClient *rest.Client
	for name, c := range map[string]*rest.Client{"nil": nilClient, "zero": {}} {
		resp, err := c.SendWithContext(t.Context(), rest.Request{Method: rest.Get, BaseURL: srv.URL})
		if err != nil || resp.Body != "ok" {
			t.Errorf("%s Client: Send(%q) = %v, %v; want body %q", name, srv.URL, resp, err, "ok")
		}
	}
}

func TestMakeRequest(t *testing.T) {
	t.Parallel()
	srv, rec := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, "streamed")
	})
	req, err := http.NewRequestWithContext(t.Context(), "POST", srv.URL, strings.NewReader("payload"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := rest.MakeRequest(req)
	if err != nil {
		t.Fatalf("MakeRequest(POST %q) error = %v", srv.URL, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != 202 || string(body) != "streamed" {
		t.Errorf("MakeRequest(POST %q) = %d %q (read error %v), want 202 %q", srv.URL, res.StatusCode, body, err, "streamed")
	}
	if got := only(t, rec).Body; got != "payload" {
		t.Errorf("MakeRequest(POST %q): server saw body %q, want %q", srv.URL, got, "payload")
	}

	if res, err := rest.MakeRequest(nil); res != nil || err == nil {
		t.Errorf("MakeRequest(nil) = %v, %v; want nil, an error", res, err)
	}
}

func TestBuildResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		res      *http.Response
		want     *rest.Response
		wantErr  error
		wantText string
	}{
		{
			name: "body and headers",
			res: &http.Response{StatusCode: 404, Header: http.Header{"X-A": {"1"}},
				Body: io.NopCloser(strings.NewReader(`{"error":"nope"}`)), ContentLength: -1},
			want: &rest.Response{StatusCode: 404, Body: `{"error":"nope"}`, Headers: map[string][]string{"X-A": {"1"}}},
		},
		{
			name: "HEAD is not read",
			res: &http.Response{StatusCode: 200, Request: &http.Request{Method: "HEAD"},
				Body: io.NopCloser(strings.NewReader("must not be read")), ContentLength: 16},
			want: &rest.Response{StatusCode: 200},
		},
		{
			name:     "read error",
			res:      &http.Response{StatusCode: 200, Body: io.NopCloser(failingReader{}), ContentLength: -1},
			wantErr:  errRead,
			wantText: "rest: reading response body: test read failure",
		},
		{
			name:     "nil response",
			wantText: "rest: BuildResponse called with a nil *http.Response",
		},
	}
	for _, tc := range tests {
		tc := tc // a copy per iteration: the module is Go 1.14
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := rest.BuildResponse(tc.res)
			if tc.wantText != "" {
				if err == nil || err.Error() != tc.wantText || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) || got != nil {
					t.Errorf("BuildResponse() = %v, %v; want nil, %q", got, err, tc.wantText)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("BuildResponse() = %+v, %v; want %+v, nil", got, err, tc.want)
			}
		})
	}
}

var errRead = errors.New("test read failure")

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errRead }

func TestAddQueryParameters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		base   string
		params map[string]string
		want   string
	}{
		{"http://api.test.com", map[string]string{"test": "1", "test2": "2"}, "http://api.test.com?test=1&test2=2"},
		{"http://api.test.com/x?a=1", map[string]string{"b": "2"}, "http://api.test.com/x?a=1&b=2"},
		{"http://api.test.com/x?a=1&b=9#top", map[string]string{"b": "a b/é"}, "http://api.test.com/x?a=1&b=a+b%2F%C3%A9#top"},
		{"http://api.test.com/x?", map[string]string{"b": "2"}, "http://api.test.com/x?b=2"},
		{"http://api.test.com/x?a=1", nil, "http://api.test.com/x?a=1"},
		{"http://api.test.com/x", map[string]string{}, "http://api.test.com/x"},
	}
	for _, tc := range tests {
		tc := tc // a copy per iteration: the module is Go 1.14
		t.Run(tc.base, func(t *testing.T) {
			t.Parallel()
			if got := rest.AddQueryParameters(tc.base, tc.params); got != tc.want {
				t.Errorf("AddQueryParameters(%q, %v) = %q, want %q", tc.base, tc.params, got, tc.want)
			}
		})
	}
}

func TestBuildRequestObjectGetBody(t *testing.T) {
	t.Parallel()
	req, err := rest.BuildRequestObject(rest.Request{Method: rest.Post, BaseURL: "https://api.example.com/x", Body: []byte("abc")})
	if err != nil {
		t.Fatal(err)
	}
	if req.GetBody == nil || req.ContentLength != 3 {
		t.Fatalf("BuildRequestObject(POST with body): GetBody nil = %t, ContentLength = %d; want false, 3", req.GetBody == nil, req.ContentLength)
	}
	body, err := req.GetBody()
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(body); string(b) != "abc" {
		t.Errorf("BuildRequestObject(POST with body).GetBody() read %q, want %q", b, "abc")
	}
}

func TestRestError(t *testing.T) {
	t.Parallel()
	var nilErr *rest.RestError
	tests := []struct {
		name string
		err  *rest.RestError
		want string
	}{
		{"nil receiver", nilErr, "rest: nil RestError"},
		{"nil Response", &rest.RestError{}, "rest: RestError without a response"},
		{"body", &rest.RestError{Response: &rest.Response{StatusCode: 400, Body: `{"result": "failure"}`}}, `{"result": "failure"}`},
		{"empty body", &rest.RestError{Response: &rest.Response{StatusCode: 503}}, "rest: HTTP status 503 Service Unavailable"},
		{"unknown status", &rest.RestError{Response: &rest.Response{StatusCode: 599}}, "rest: HTTP status 599"},
	}
	for _, tc := range tests {
		tc := tc // a copy per iteration: the module is Go 1.14
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var err error = tc.err
			if got := err.Error(); got != tc.want {
				t.Errorf("RestError.Error() = %q, want %q", got, tc.want)
			}
		})
	}
}
