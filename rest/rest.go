package rest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/hookline/hookline/rest/header"
)

// Version is the version of this package's API. It is not the version of
// the classic github.com/sendgrid/rest package, which also exported a
// Version constant.
const Version = "0.1.0"

// Method is an HTTP request method. Any valid HTTP token is accepted (methods
// are case-sensitive and sent as written); the empty Method means GET, as in
// net/http.
type Method string

// The HTTP methods. Head and Options are additions to the classic package.
const (
	Get     Method = "GET"
	Post    Method = "POST"
	Put     Method = "PUT"
	Patch   Method = "PATCH"
	Delete  Method = "DELETE"
	Head    Method = "HEAD"
	Options Method = "OPTIONS"
)

// DefaultTimeout is the overall time limit of one attempt (connecting,
// sending, waiting and reading the whole response) used by DefaultClient and
// by a Client whose HTTPClient is nil.
const DefaultTimeout = 30 * time.Second

// DefaultMaxResponseBytes is the response body limit of a Client whose
// MaxResponseBytes is zero: 32 MiB, above the largest webhook delivery
// (25 MiB) that hookline relays.
const DefaultMaxResponseBytes int64 = 32 << 20

// Sentinel errors for the conditions callers branch on; errors returned by
// this package wrap them, so test with errors.Is. An error wrapping
// ErrInvalidMethod, ErrInvalidURL or ErrInvalidHeader means that no request
// was sent. Transport and context errors are wrapped as they come from
// net/http and the context.
var (
	// ErrInvalidMethod reports a Request.Method that is not an HTTP token.
	ErrInvalidMethod = errors.New("rest: invalid method")
	// ErrInvalidURL reports a Request.BaseURL that is empty, unparsable,
	// without scheme or host, or whose scheme is not http or https.
	ErrInvalidURL = errors.New("rest: invalid URL")
	// ErrInvalidHeader reports a Request.Headers entry whose name is not an
	// HTTP token or whose value contains a control character such as CR or LF.
	ErrInvalidHeader = errors.New("rest: invalid header")
	// ErrResponseTooLarge reports a response body larger than the client's
	// MaxResponseBytes (DefaultMaxResponseBytes if zero). The body is not
	// returned; the request was sent and may have had effects.
	ErrResponseTooLarge = errors.New("rest: response body too large")
)

// Request is one HTTP request to send. The zero value is not usable: BaseURL
// is required.
//
// Send does not modify a Request or its maps and does not retain them after
// it returns; Body must not be modified while Send runs.
type Request struct {
	// Method is the HTTP method. If empty, GET.
	Method Method
	// BaseURL is the complete URL: scheme (http or https), host, path and
	// optionally a query, e.g. https://api.example.com/v3/resource.
	BaseURL string
	// Headers are sent as request headers, one value per name. Names are
	// case-insensitive; when two names differ only in case, the one that
	// sorts last wins. A "Host" entry sets the request's Host. Content-Length
	// and Transfer-Encoding are always computed from Body. If nil, only the
	// default headers of net/http (and the Content-Type default) are sent.
	Headers map[string]string
	// QueryParams are added to the query of BaseURL, each entry as one
	// parameter, escaped as by url.QueryEscape and sorted by name. An entry
	// replaces parameters of the same name already in BaseURL; other
	// parameters of BaseURL are kept as written. If nil, BaseURL's query is
	// sent unchanged.
	QueryParams map[string]string
	// Body is sent exactly as the request payload. If Body is not empty and
	// Headers has no Content-Type (in any letter case), Content-Type is
	// application/json. If nil or empty, no payload is sent.
	Body []byte
}

// Response is an HTTP response. A non-2xx StatusCode is a normal Response,
// not an error. A Response returned by this package is not shared: the
// caller may modify it.
type Response struct {
	StatusCode int    // e.g. 200
	Body       string // e.g. {"result": "success"}; empty for HEAD requests
	// Headers are the response headers with canonical names, e.g.
	// map[X-Ratelimit-Limit:[600]]; the underlying map of the
	// http.Response's Header, never nil in a Response from Send.
	Headers map[string][]string
}

// RestError is an error carrying an HTTP response, for callers that turn a
// non-2xx Response into an error. This package never returns it. The zero
// value and a nil *RestError are safe to use.
type RestError struct {
	// Response is the response the error describes. It may be nil.
	Response *Response
}

// Error returns the response body, as the classic package did. It never
// panics: a nil receiver, a nil Response or an empty body give a message
// built from what is known.
func (e *RestError) Error() string {
	switch {
	case e == nil:
		return "rest: nil RestError"
	case e.Response == nil:
		return "rest: RestError without a response"
	case e.Response.Body != "":
		return e.Response.Body
	}
	code := e.Response.StatusCode
	if text := http.StatusText(code); text != "" {
		return fmt.Sprintf("rest: HTTP status %d %s", code, text)
	}
	return fmt.Sprintf("rest: HTTP status %d", code)
}

// Client sends Requests. The zero value is ready to use: it sends with a
// client that has DefaultTimeout, limits response bodies to
// DefaultMaxResponseBytes and does not retry. A nil *Client behaves as the
// zero Client.
//
// A Client is safe for concurrent use by multiple goroutines once its fields
// are no longer modified.
//
// Unlike the classic package, Client has more than one field, so an unkeyed
// literal such as rest.Client{hc} no longer compiles; write
// rest.Client{HTTPClient: hc}.
type Client struct {
	// HTTPClient sends the requests; its Timeout, Transport, CheckRedirect and
	// Jar apply. If nil, a client with DefaultTimeout and
	// http.DefaultTransport is used.
	HTTPClient *http.Client

	// MaxResponseBytes limits the response body that Send reads; a larger
	// body makes Send fail with ErrResponseTooLarge. If zero,
	// DefaultMaxResponseBytes; if negative, there is no limit. MakeRequest
	// leaves the body to the caller and does not apply it.
	MaxResponseBytes int64

	// Retry is the retry policy for Send and MakeRequest. If nil, every
	// request is sent once.
	Retry *RetryPolicy
}

// defaultHTTPClient is used by a Client whose HTTPClient is nil.
var defaultHTTPClient = &http.Client{Timeout: DefaultTimeout}

// DefaultClient is used by Send, SendWithContext, API, MakeRequest and
// BuildResponse. Its HTTPClient has DefaultTimeout; it does not retry.
// Replace it or change its fields only before concurrent use; if set to nil,
// the package-level functions behave as the zero Client.
var DefaultClient = &Client{HTTPClient: &http.Client{Timeout: DefaultTimeout}}

// Send sends request with DefaultClient and context.Background(); see
// Client.SendWithContext for the result and errors. It is safe for concurrent
// use.
func Send(request Request) (*Response, error) {
	return DefaultClient.SendWithContext(context.Background(), request)
}

// SendWithContext sends request with DefaultClient and ctx; see
// Client.SendWithContext for the result and errors. It is safe for concurrent
// use.
func SendWithContext(ctx context.Context, request Request) (*Response, error) {
	return DefaultClient.SendWithContext(ctx, request)
}

// API sends request with DefaultClient.
//
// Deprecated: API is the classic package's first name for Send; use Send.
func API(request Request) (*Response, error) {
	return Send(request)
}

// MakeRequest sends req with DefaultClient; see Client.MakeRequest. The
// caller must close the response body. It is safe for concurrent use.
func MakeRequest(req *http.Request) (*http.Response, error) {
	return DefaultClient.MakeRequest(req)
}

// Send sends request with context.Background(). See SendWithContext.
func (c *Client) Send(request Request) (*Response, error) {
	return c.SendWithContext(context.Background(), request)
}

// API sends request.
//
// Deprecated: API is the classic package's first name for Send; use Send.
func (c *Client) API(request Request) (*Response, error) {
	return c.Send(request)
}

// SendWithContext sends request, reads the whole response body and returns
// the response; a nil ctx means context.Background(). A non-2xx status is
// returned as a Response with a nil error. On error the Response is nil.
//
// Errors wrap ErrInvalidMethod, ErrInvalidURL or ErrInvalidHeader when the
// request is malformed (nothing is sent), ErrResponseTooLarge when the body
// exceeds MaxResponseBytes, the context's error when ctx ends (test with
// errors.Is(err, context.Canceled)), and otherwise the transport error (a
// *url.Error from net/http, reachable with errors.As) or the error that
// interrupted reading the body (such as io.ErrUnexpectedEOF).
//
// With a Retry policy, failed attempts are repeated as RetryPolicy describes;
// a response to a HEAD request is never read.
func (c *Client) SendWithContext(ctx context.Context, request Request) (*Response, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	req, err := buildRequest(ctx, request)
	if err != nil {
		return nil, err
	}
	_, resp, err := c.exchange(req, true)
	return resp, err
}

// MakeRequest sends req and returns the response with its body unread; the
// caller must close it. A non-2xx status is not an error. Errors are as for
// SendWithContext, except that req is not validated beyond what net/http
// checks and no size limit applies.
//
// With a Retry policy, req is resent only if its body can be recreated: it
// has no body (nil or http.NoBody) or a GetBody function, which
// http.NewRequest sets for *bytes.Buffer, *bytes.Reader and *strings.Reader
// bodies. Otherwise it is sent once.
func (c *Client) MakeRequest(req *http.Request) (*http.Response, error) {
	if req == nil {
		return nil, errors.New("rest: MakeRequest called with a nil *http.Request")
	}
	res, _, err := c.exchange(req, false)
	return res, err
}

// BuildRequestObject returns the *http.Request that Send would send for
// request, with context.Background(). It returns a nil request and an error
// wrapping ErrInvalidMethod, ErrInvalidURL or ErrInvalidHeader when request
// is malformed.
func BuildRequestObject(request Request) (*http.Request, error) {
	return buildRequest(context.Background(), request)
}

// BuildResponse reads and closes res.Body (unless res answers a HEAD request)
// and returns the Response. The body is limited as by DefaultClient; a larger
// one gives an error wrapping ErrResponseTooLarge. On error the Response is
// nil.
func BuildResponse(res *http.Response) (*Response, error) {
	if res == nil {
		return nil, errors.New("rest: BuildResponse called with a nil *http.Response")
	}
	resp, err := readResponse(res, DefaultClient.maxBytes())
	if err != nil {
		return nil, readError("", err)
	}
	return resp, nil
}

// readError wraps an error from readResponse; prefix names the request.
func readError(prefix string, err error) error {
	if errors.Is(err, ErrResponseTooLarge) {
		return fmt.Errorf("rest: %s%w", prefix, err)
	}
	return fmt.Errorf("rest: %sreading response body: %w", prefix, err)
}

// AddQueryParameters returns baseURL with queryParams added to its query, as
// Send does: entries are escaped and sorted by name, replace parameters of the
// same name, and keep the rest of the query and any fragment in place. Unlike
// the classic function it does not break a URL that already has a query, and
// returns baseURL unchanged when queryParams is empty.
func AddQueryParameters(baseURL string, queryParams map[string]string) string {
	if len(queryParams) == 0 {
		return baseURL
	}
	fragment := ""
	if i := strings.IndexByte(baseURL, '#'); i >= 0 {
		baseURL, fragment = baseURL[:i], baseURL[i:]
	}
	query := ""
	if i := strings.IndexByte(baseURL, '?'); i >= 0 {
		baseURL, query = baseURL[:i], baseURL[i+1:]
	}
	return baseURL + "?" + mergeQuery(query, queryParams) + fragment
}

// httpClient returns the *http.Client that sends c's requests.
func (c *Client) httpClient() *http.Client {
	if c == nil || c.HTTPClient == nil {
		return defaultHTTPClient
	}
	return c.HTTPClient
}

// maxBytes returns the response body limit; negative means none.
func (c *Client) maxBytes() int64 {
	if c == nil || c.MaxResponseBytes == 0 {
		return DefaultMaxResponseBytes
	}
	return c.MaxResponseBytes
}

// retryPolicy returns c's retry policy, nil if none.
func (c *Client) retryPolicy() *RetryPolicy {
	if c == nil {
		return nil
	}
	return c.Retry
}

// exchange sends req, retrying as c.Retry allows. If read is true, it reads
// the response into a Response and closes the body; otherwise the caller gets
// the *http.Response with the body open.
func (c *Client) exchange(req *http.Request, read bool) (*http.Response, *Response, error) {
	hc := c.httpClient()
	policy := c.retryPolicy()
	ctx := req.Context()
	resendable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	for attempt := 1; ; attempt++ {
		r := req
		if attempt > 1 {
			var err error
			if r, err = rewind(req); err != nil {
				return nil, nil, fmt.Errorf("rest: recreating the body of %s to retry: %w", describe(req), err)
			}
		}
		var resp *Response
		res, err := hc.Do(r)
		if err != nil {
			// As net/http returns it (a *url.Error), so that code written
			// for sendgrid/rest takes the same branches: err.(*url.Error),
			// err.(net.Error), os.IsTimeout(err).
			res = nil // only CheckRedirect failures return one, already closed
		} else if read {
			if resp, err = readResponse(res, c.maxBytes()); err != nil {
				err = readError(describe(r)+": ", err)
			}
		}

		retry := policy != nil && resendable && attempt < policy.attempts() && policy.retryable(ctx, res, err)
		var wait time.Duration
		if retry {
			var header http.Header
			if err == nil {
				header = res.Header
			}
			wait = policy.delay(attempt, header)
			if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
				retry = false // waiting would outlive ctx; report what we have
			}
		}
		if retry && policy.OnRetry != nil {
			if err != nil {
				policy.OnRetry(attempt, wait, nil, err)
			} else {
				policy.OnRetry(attempt, wait, res, nil)
			}
		}
		if !retry {
			if err != nil {
				if attempt > 1 {
					err = &attemptsError{err: err, attempts: attempt}
				}
				return nil, nil, err
			}
			return res, resp, nil
		}
		if !read && err == nil {
			drainAndClose(res.Body)
		}
		if werr := policy.wait(ctx, wait); werr != nil {
			return nil, nil, fmt.Errorf("rest: waiting %v to retry %s: %w", wait, describe(req), werr)
		}
	}
}

// attemptsError is the last attempt's error after retries. It answers
// os.IsTimeout and a net.Error assertion as that error does, and unwraps to
// it (errors.As finds its *url.Error).
type attemptsError struct {
	err      error
	attempts int
}

func (e *attemptsError) Error() string {
	return fmt.Sprintf("%v (gave up after %d attempts)", e.err, e.attempts)
}

func (e *attemptsError) Unwrap() error { return e.err }

// Timeout and Temporary make it a net.Error like the last attempt's.
func (e *attemptsError) Timeout() bool {
	var ne net.Error
	return errors.As(e.err, &ne) && ne.Timeout()
}

func (e *attemptsError) Temporary() bool {
	var ne interface{ Temporary() bool }
	return errors.As(e.err, &ne) && ne.Temporary()
}

// rewind returns a copy of req with a fresh body for another attempt.
func rewind(req *http.Request) (*http.Request, error) {
	r := req.Clone(req.Context())
	if req.Body != nil && req.Body != http.NoBody {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = body
	}
	return r, nil
}

// describe names a request in errors: method and URL without user
// information, query or fragment, which may hold secrets.
func describe(req *http.Request) string {
	u := *req.URL
	u.User, u.RawQuery, u.ForceQuery, u.Fragment = nil, "", false, ""
	return req.Method + " " + u.String()
}

// readResponse reads res into a Response, limiting the body to limit bytes
// (none if negative), and closes the body. HEAD responses are not read.
func readResponse(res *http.Response, limit int64) (*Response, error) {
	defer res.Body.Close()
	resp := &Response{StatusCode: res.StatusCode, Headers: res.Header}
	if res.Request != nil && res.Request.Method == http.MethodHead {
		return resp, nil
	}
	body, err := readBody(res.Body, res.ContentLength, limit)
	if err != nil {
		return nil, err
	}
	resp.Body = body
	return resp, nil
}

// tooLarge is the error for a body over limit bytes.
func tooLarge(limit int64) error {
	return &detailError{kind: ErrResponseTooLarge, msg: fmt.Sprintf(
		"response body exceeds the %d-byte limit (Client.MaxResponseBytes); raise the limit, or use MakeRequest to stream the body", limit)}
}

// readBody reads r to EOF. size is the announced length (-1 if unknown);
// limit is the largest body accepted (none if negative).
func readBody(r io.Reader, size, limit int64) (string, error) {
	if limit == math.MaxInt64 {
		limit = -1 // limit+1 below would overflow
	}
	if limit >= 0 {
		if size > limit {
			return "", tooLarge(limit)
		}
		r = io.LimitReader(r, limit+1)
	}
	var buf bytes.Buffer
	if size > 0 {
		const maxHint = 1 << 20 // do not trust a huge announced length
		if size > maxHint && limit < 0 {
			size = maxHint
		}
		// bytes.Buffer.ReadFrom wants MinRead spare bytes to see EOF.
		buf.Grow(int(size) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(r); err != nil {
		return "", err
	}
	if limit >= 0 && int64(buf.Len()) > limit {
		return "", tooLarge(limit)
	}
	return buf.String(), nil
}

// drainAndClose reads a little of body, so that the connection can be
// reused, and closes it.
func drainAndClose(body io.ReadCloser) {
	var buf [512]byte
	for n := 0; n < 64<<10; {
		m, err := body.Read(buf[:])
		n += m
		if err != nil {
			break
		}
	}
	body.Close()
}

// detailError is an error with a full message that wraps a sentinel kind.
type detailError struct {
	kind error
	msg  string
}

func (e *detailError) Error() string { return e.msg }
func (e *detailError) Unwrap() error { return e.kind }

// buildRequest validates request and builds the *http.Request for it.
func buildRequest(ctx context.Context, request Request) (*http.Request, error) {
	method := string(request.Method)
	if method == "" {
		method = http.MethodGet
	} else if !header.IsToken(method) {
		return nil, &detailError{kind: ErrInvalidMethod, msg: fmt.Sprintf(
			"rest: method %q is not a valid HTTP method; use one of rest.Get, rest.Post, rest.Put, rest.Patch, rest.Delete, rest.Head, rest.Options", method)}
	}
	if strings.TrimSpace(request.BaseURL) == "" {
		return nil, &detailError{kind: ErrInvalidURL, msg: "rest: BaseURL is empty; set it to a complete URL such as https://api.example.com/v3/resource"}
	}
	var body io.Reader
	if len(request.Body) > 0 {
		// http.NewRequest sets ContentLength and GetBody for a *bytes.Reader,
		// so net/http can resend the body on 307 and 308 redirects and the
		// retry policy can resend it on another attempt.
		body = bytes.NewReader(request.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, request.BaseURL, body)
	if err != nil {
		return nil, badURL(request.BaseURL, err)
	}
	if err := checkURL(request.BaseURL, req); err != nil {
		return nil, err
	}
	if len(request.QueryParams) > 0 {
		req.URL.RawQuery = mergeQuery(req.URL.RawQuery, request.QueryParams)
		req.URL.ForceQuery = false
	}
	hasContentType := false
	for _, name := range sortedKeys(request.Headers) {
		value := request.Headers[name]
		if !header.IsToken(name) {
			return nil, &detailError{kind: ErrInvalidHeader, msg: fmt.Sprintf(
				"rest: header name %q is not a valid HTTP header name; remove spaces, colons and other separators", name)}
		}
		if !header.IsValue(value) {
			// The value is not quoted: it may be a secret.
			return nil, &detailError{kind: ErrInvalidHeader, msg: fmt.Sprintf(
				"rest: header %q has a value with a control character (such as CR or LF); remove it", name)}
		}
		switch {
		case strings.EqualFold(name, "Host"):
			req.Host = value
			continue
		case strings.EqualFold(name, "Content-Type"):
			hasContentType = true
		}
		req.Header.Set(name, value)
	}
	if len(request.Body) > 0 && !hasContentType {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// badURL explains a BaseURL that net/http could not parse.
func badURL(raw string, err error) error {
	if !strings.Contains(raw, "://") {
		return noScheme(raw)
	}
	if ue, ok := err.(*url.Error); ok {
		err = ue.Err // drop url.Error's repetition of the URL
	}
	return &detailError{kind: ErrInvalidURL, msg: fmt.Sprintf(
		"rest: BaseURL %q is not a valid URL (%v); percent-encode spaces and special characters", raw, err)}
}

// noScheme explains a BaseURL without a scheme, suggesting one.
func noScheme(raw string) error {
	if strings.HasPrefix(raw, "/") && !strings.HasPrefix(raw, "//") {
		return &detailError{kind: ErrInvalidURL, msg: fmt.Sprintf(
			"rest: BaseURL %q has no scheme and host; set it to a complete URL such as https://api.example.com%s", raw, raw)}
	}
	hostPath := strings.TrimPrefix(raw, "//")
	scheme := "https://"
	for _, local := range []string{"localhost", "127.", "[::1]", "0.0.0.0"} {
		if strings.HasPrefix(hostPath, local) {
			scheme = "http://"
		}
	}
	return &detailError{kind: ErrInvalidURL, msg: fmt.Sprintf(
		"rest: BaseURL %q has no scheme; did you mean %s%s?", raw, scheme, hostPath)}
}

// checkURL rejects parsed URLs that net/http could not send.
func checkURL(raw string, req *http.Request) error {
	u := req.URL
	switch {
	case !strings.Contains(raw, "://"):
		return noScheme(raw)
	case !strings.EqualFold(u.Scheme, "http") && !strings.EqualFold(u.Scheme, "https"):
		return &detailError{kind: ErrInvalidURL, msg: fmt.Sprintf(
			"rest: BaseURL %q has scheme %q; only http and https are supported", raw, u.Scheme)}
	case u.Host == "":
		return &detailError{kind: ErrInvalidURL, msg: fmt.Sprintf(
			"rest: BaseURL %q has no host; write it as %s://host/path", raw, strings.ToLower(u.Scheme))}
	}
	return nil
}

// mergeQuery returns the raw query rawQuery with params added: parameters of
// rawQuery named in params are dropped, the others are kept as written, and
// params follow, escaped and sorted by name.
func mergeQuery(rawQuery string, params map[string]string) string {
	var b strings.Builder
	size := len(rawQuery)
	for k, v := range params {
		size += len(k) + len(v) + 2
	}
	b.Grow(size)
	for rawQuery != "" {
		part := rawQuery
		if i := strings.IndexByte(rawQuery, '&'); i >= 0 {
			part, rawQuery = rawQuery[:i], rawQuery[i+1:]
		} else {
			rawQuery = ""
		}
		if part == "" {
			continue
		}
		name := part
		if i := strings.IndexByte(part, '='); i >= 0 {
			name = part[:i]
		}
		if name, err := url.QueryUnescape(name); err == nil {
			if _, replaced := params[name]; replaced {
				continue
			}
		}
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(part)
	}
	for _, name := range sortedKeys(params) {
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(name))
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(params[name]))
	}
	return b.String()
}

// sortedKeys returns the keys of m in increasing order.
func sortedKeys(m map[string]string) []string {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
