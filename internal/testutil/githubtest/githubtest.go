// Package githubtest serves GitHub's REST API for webhooks on loopback, as
// GitHub's published OpenAPI description (npm @octokit/openapi, pinned in
// interop/) defines it, for tests of code that calls GitHub. The part of the
// description it serves is committed in testdata (Subset writes it; go
// generate runs it), so its tests need no node package.
//
// Every request is checked against the description's operation for its
// method and path (path and query parameters, body) with
// github.com/getkin/kin-openapi, the most used Go OpenAPI 3.0 library, which
// reads GitHub's 3.0.3 description as it is; a request the description does
// not allow fails the test. Every answer is the description's own example
// for that operation and status, with the values this server keeps (hooks,
// deliveries) put in, and is itself checked against the description's
// schema before it is sent. The server keeps just enough state to be
// GitHub for one test: hooks created, changed and deleted, and deliveries it
// made by POSTing, as GitHub does, a signed payload to a hook's URL.
package githubtest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/hookline/hookline/internal/testutil/testenv"
)

// Token is the token the server accepts.
const Token = "ghp_githubtestTOKEN0000000000000000000000"

var (
	loadOnce sync.Once
	loadErr  error
	rawDoc   []byte
)

// subsetFile is the part of GitHub's description the server serves (see
// Subset), committed so that the tests that use it run with Go alone.
const subsetFile = "internal/testutil/githubtest/testdata/api.github.com.json"

// description reads the served part of the pinned description once per
// test binary.
func description(t testing.TB) []byte {
	t.Helper()
	loadOnce.Do(func() {
		root, err := testenv.ModuleRoot()
		if err != nil {
			loadErr = err
			return
		}
		rawDoc, loadErr = os.ReadFile(filepath.Join(root, filepath.FromSlash(subsetFile)))
	})
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return rawDoc
}

var (
	docOnce sync.Once
	doc     *openapi3.T
	docErr  error
)

// document parses the description once per test binary.
func document(t testing.TB) *openapi3.T {
	t.Helper()
	raw := description(t)
	docOnce.Do(func() { doc, docErr = openapi3.NewLoader().LoadFromData(raw) })
	if docErr != nil {
		t.Fatalf("githubtest: loading the description: %v", docErr)
	}
	return doc
}

// Hook is a webhook the server keeps.
type Hook struct {
	ID     int64
	Owner  string // "/repos/OWNER/NAME" or "/orgs/ORG"
	URL    string
	Secret string
	Events []string
	Active bool
}

// HookDelivery is a delivery the server made (GitHub's record of it).
type HookDelivery struct {
	ID, HookID int64
	GUID       string
	Event      string
	Action     string
	Header     map[string]string
	Payload    json.RawMessage
	Status     int
	At         time.Time
	Redelivery bool
}

// Refusal is an answer the server gives instead of the next one.
type Refusal struct {
	Status int
	Header http.Header
	Body   string
}

// Server is the API. Its fields are read under its lock through the methods.
type Server struct {
	URL    string // the API's base URL, with a path if New was given one
	WebURL string // GitHub's web pages (the App manifest form's target)

	t      testing.TB
	router routers.Router
	client *http.Client

	mu         sync.Mutex
	nextID     int64
	hooks      map[int64]*Hook
	deliveries []*HookDelivery
	refusals   []Refusal
	refuseAt   []pathRefusal
	calls      []string
	sending    sync.WaitGroup
	skew       time.Duration // GitHub's clock minus the real one
	noStatus   bool          // the deliveries list ignores ?status= (IgnoreStatusFilter)
	manifests  map[string]*manifestApp
	app        *manifestApp // the App made from a manifest, once converted
}

// New starts a server whose API is at base path prefix ("" for
// api.github.com's layout, "/api/v3" for GitHub Enterprise Server's) and
// stops it when the test ends.
func New(t testing.TB, prefix string) *Server {
	t.Helper()
	doc := document(t)
	s := &Server{t: t, hooks: map[int64]*Hook{}, nextID: 1000, client: &http.Client{Timeout: 10 * time.Second}, manifests: map[string]*manifestApp{}}
	s.hooks[AppHookID] = &Hook{ID: AppHookID, Owner: "/app", URL: AppHookURL, Secret: "the App's own secret", Active: true, Events: []string{"*"}}
	hs := httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = hs.URL + prefix
	s.WebURL = hs.URL
	// The one loaded document (the served operations only: Subset kept
	// them), with this server's URL.
	served := *doc
	served.Servers = openapi3.Servers{{URL: s.URL}}
	var err error
	// GitHub's description has examples its own schemas refuse
	// (actions-hosted-runner's "example": 20.04 for a string): the router
	// checks the document, not its examples.
	if s.router, err = legacy.NewRouter(&served, openapi3.DisableExamplesValidation()); err != nil {
		t.Fatalf("githubtest: %v", err)
	}
	t.Cleanup(func() {
		hs.Close()       // waits for the requests, the last to start a delivery
		s.sending.Wait() // then for the deliveries
	})
	return s
}

// Hooks returns the repository and organisation hooks the server keeps,
// by id (not the App's: AppHook).
func (s *Server) Hooks() []Hook {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Hook
	for _, id := range slices.Sorted(maps.Keys(s.hooks)) {
		if id == AppHookID {
			continue
		}
		out = append(out, *s.hooks[id])
	}
	return out
}

// AddHook adds a hook as if made earlier (by a crashed run, say).
func (s *Server) AddHook(h Hook) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	h.ID = s.nextID
	s.hooks[h.ID] = &h
	return h.ID
}

// Deliveries returns the deliveries the server made (its record of them,
// which it writes once the URL has answered), oldest first.
func (s *Server) Deliveries() []HookDelivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]HookDelivery, 0, len(s.deliveries))
	for _, d := range s.deliveries {
		out = append(out, *d)
	}
	return out
}

// Calls returns the operationIds of the requests served, in order.
func (s *Server) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// RefuseRequest makes the server give r to the next request with method
// and path (the API's, without the base URL's path), once.
func (s *Server) RefuseRequest(method, path string, r Refusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuseAt = append(s.refuseAt, pathRefusal{method, path, r})
}

type pathRefusal struct {
	method, path string
	r            Refusal
}

// Refuse makes the server give r instead of its next answers, once each.
func (s *Server) Refuse(r ...Refusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refusals = append(s.refusals, r...)
}

// IgnoreStatusFilter makes the deliveries list ignore its status filter, as
// GitHub Enterprise Server 3.2-3.4 do (their description has none).
func (s *Server) IgnoreStatusFilter() {
	s.mu.Lock()
	s.noStatus = true
	s.mu.Unlock()
}

// Deliver sends event with payload to hook id's URL as GitHub does
// (X-GitHub-Event, X-GitHub-Delivery, X-Hub-Signature-256 with the hook's
// secret, X-GitHub-Hook-ID), records the delivery with the status the URL
// answered and returns it.
func (s *Server) Deliver(hookID int64, event string, payload []byte) (HookDelivery, error) {
	return s.deliver(hookID, event, payload, "")
}

// deliver is Deliver; a redelivery gives the GUID of the delivery it
// repeats, recorded before the request is made (a test that sees the
// request sees the record as GitHub keeps it).
func (s *Server) deliver(hookID int64, event string, payload []byte, redeliveryOf string) (HookDelivery, error) {
	s.mu.Lock()
	h, ok := s.hooks[hookID]
	var hook Hook
	if ok {
		hook = *h
	}
	s.nextID++
	id := s.nextID
	s.mu.Unlock()
	if !ok {
		return HookDelivery{}, fmt.Errorf("githubtest: no hook %d", hookID)
	}
	var head struct{ Action string }
	_ = json.Unmarshal(payload, &head)
	d := HookDelivery{ID: id, HookID: hookID, GUID: rand.Text(), Event: event, Action: head.Action, Payload: payload, At: time.Now().UTC().Truncate(time.Second)}
	if redeliveryOf != "" {
		d.GUID, d.Redelivery = redeliveryOf, true
	}
	mac := hmac.New(sha256.New, []byte(hook.Secret))
	mac.Write(payload)
	d.Header = map[string]string{
		"Accept":                                 "*/*",
		"User-Agent":                             "GitHub-Hookshot/githubtest",
		"X-GitHub-Delivery":                      d.GUID,
		"X-GitHub-Event":                         event,
		"X-GitHub-Hook-ID":                       strconv.FormatInt(hookID, 10),
		"X-GitHub-Hook-Installation-Target-ID":   "1",
		"X-GitHub-Hook-Installation-Target-Type": targetType(hook.Owner),
		"X-Hub-Signature-256":                    "sha256=" + hex.EncodeToString(mac.Sum(nil)),
		"Content-Type":                           "application/json",
	}
	req, err := http.NewRequest(http.MethodPost, hook.URL, bytes.NewReader(payload))
	if err != nil {
		return d, err
	}
	for k, v := range d.Header {
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		d.Status = resp.StatusCode
	} else {
		d.Status = 502
	}
	s.mu.Lock()
	s.deliveries = append(s.deliveries, &d)
	s.mu.Unlock()
	return d, err
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Date", s.now().UTC().Format(http.TimeFormat))
	if strings.HasSuffix(r.URL.Path, "/settings/apps/new") {
		s.newAppForm(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.URL.Scheme, r.URL.Host = "http", r.Host // the router matches the server URL
	route, params, err := s.router.FindRoute(r)
	if err != nil {
		s.t.Errorf("githubtest: %s %s is not a webhook operation of GitHub's description: %v", r.Method, r.URL, err)
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	}
	op := route.Operation.OperationID
	s.mu.Lock()
	s.calls = append(s.calls, op)
	s.mu.Unlock()
	in := &openapi3filter.RequestValidationInput{
		Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true},
	}
	if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
		s.t.Errorf("githubtest: %s %s (%s) breaks GitHub's description: %v", r.Method, r.URL, op, err)
		writeJSON(w, http.StatusUnprocessableEntity, `{"message":"Validation Failed"}`)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	for name, want := range map[string]string{"Accept": "application/vnd.github+json", "X-Github-Api-Version": "2022-11-28"} {
		if got := r.Header.Get(name); got != want {
			s.t.Errorf("githubtest: %s %s: header %s = %q, want %q (GitHub's REST API documentation)", r.Method, r.URL, name, got, want)
		}
	}
	apiPath := strings.TrimPrefix(r.URL.Path, strings.TrimPrefix(s.URL, hostOf(s.URL)))
	switch {
	case strings.HasPrefix(apiPath, "/app-manifests/"): // no credentials
	case apiPath == "/app" || strings.HasPrefix(apiPath, "/app/"):
		if msg := s.checkJWT(r.Header.Get("Authorization")); msg != "" {
			writeJSON(w, http.StatusUnauthorized, fmt.Sprintf(`{"message":%q,"documentation_url":"https://docs.github.com/rest"}`, msg))
			return
		}
	case r.Header.Get("Authorization") != "Bearer "+Token:
		writeJSON(w, http.StatusUnauthorized, `{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest","status":"401"}`)
		return
	}
	s.mu.Lock()
	if i := slices.IndexFunc(s.refuseAt, func(p pathRefusal) bool { return p.method == r.Method && p.path == apiPath }); i >= 0 {
		s.refusals = slices.Insert(s.refusals, 0, s.refuseAt[i].r)
		s.refuseAt = slices.Delete(s.refuseAt, i, i+1)
	}
	if len(s.refusals) > 0 {
		ref := s.refusals[0]
		s.refusals = s.refusals[1:]
		s.mu.Unlock()
		maps.Copy(w.Header(), ref.Header)
		writeJSON(w, ref.Status, ref.Body)
		return
	}
	s.mu.Unlock()
	owner := apiPath
	if i := strings.Index(owner, "/hooks"); i >= 0 {
		owner = owner[:i]
	} else if strings.HasPrefix(owner, "/app/") || owner == "/app" {
		owner = "/app"
	}
	var then func() // what GitHub does after it has answered
	status, fill, next := s.operate(op, owner, params, body, r.URL.Query(), &then)
	if then != nil {
		defer func() {
			http.NewResponseController(w).Flush() // the answer first
			s.sending.Add(1)
			go func() {
				defer s.sending.Done()
				then()
			}()
		}()
	}
	if next != nil {
		u := *r.URL
		u.Scheme, u.Host = "http", r.Host
		q := u.Query()
		for k, v := range next {
			q.Set(k, v)
		}
		u.RawQuery = q.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next"`, u.String()))
	}
	if fill == nil {
		w.WriteHeader(status)
		return
	}
	s.answer(w, in, status, fill)
}

func hostOf(u string) string {
	i := strings.Index(u, "://")
	if j := strings.IndexByte(u[i+3:], '/'); j >= 0 {
		return u[:i+3+j]
	}
	return u
}

// operate does what operation op does to the server's state and returns
// the status, how to fill the description's example (nil: no body) and the
// query of the next page, if any.
func (s *Server) operate(op, owner string, params map[string]string, body []byte, query map[string][]string, then *func()) (status int, fill func(ex any) any, next map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hookID, _ := strconv.ParseInt(params["hook_id"], 10, 64)
	if owner == "/app" {
		hookID = AppHookID
	}
	h := s.hooks[hookID]
	if params["hook_id"] != "" && (h == nil || h.Owner != owner) {
		return http.StatusNotFound, func(any) any {
			return map[string]any{"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}
		}, nil
	}
	var in struct {
		Config struct{ URL, Secret string } `json:"config"`
		Events []string                     `json:"events"`
		Active *bool                        `json:"active"`
	}
	_ = json.Unmarshal(body, &in)
	switch op = op[strings.IndexByte(op, '/')+1:]; op {
	case "get-authenticated", "get-webhook-config-for-app", "update-webhook-config-for-app", "create-from-manifest":
		return s.operateApp(op, params, body)
	case "list-webhooks":
		var list []*Hook
		for _, id := range slices.Sorted(maps.Keys(s.hooks)) {
			if s.hooks[id].Owner == owner {
				list = append(list, s.hooks[id])
			}
		}
		perPage, page := pageParams(query)
		if from := (page - 1) * perPage; from < len(list) {
			list = list[from:]
		} else {
			list = nil
		}
		if len(list) > perPage {
			list, next = list[:perPage], map[string]string{"page": strconv.Itoa(page + 1)}
		}
		return http.StatusOK, func(ex any) any {
			tmpl := ex.([]any)[0]
			out := []any{}
			for _, h := range list {
				out = append(out, hookJSON(tmpl, h))
			}
			return out
		}, next
	case "create-webhook":
		s.nextID++
		h := &Hook{ID: s.nextID, Owner: owner, URL: in.Config.URL, Secret: in.Config.Secret, Events: in.Events, Active: in.Active == nil || *in.Active}
		s.hooks[h.ID] = h
		// GitHub pings a new hook once it has answered.
		*then = func() {
			payload, _ := json.Marshal(map[string]any{"zen": "Keep it logically awesome.", "hook_id": h.ID,
				"hook": map[string]any{"type": "Repository", "id": h.ID, "name": "web", "active": true, "events": h.Events,
					"config": map[string]any{"content_type": "json", "insecure_ssl": "0", "url": h.URL}}})
			s.Deliver(h.ID, "ping", payload)
		}
		hook := *h
		return http.StatusCreated, func(ex any) any { return hookJSON(ex, &hook) }, nil
	case "update-webhook":
		if in.Config.URL != "" {
			h.URL = in.Config.URL
		}
		if in.Config.Secret != "" {
			h.Secret = in.Config.Secret
		}
		if in.Events != nil {
			h.Events = in.Events
		}
		if in.Active != nil {
			h.Active = *in.Active
		}
		hook := *h
		return http.StatusOK, func(ex any) any { return hookJSON(ex, &hook) }, nil
	case "delete-webhook":
		delete(s.hooks, hookID)
		return http.StatusNoContent, nil, nil
	case "list-webhook-deliveries":
		var list []HookDelivery
		cursor, _ := strconv.ParseInt(first(query["cursor"]), 10, 64)
		for _, d := range slices.Backward(s.deliveries) {
			if d.HookID == hookID && (s.noStatus || deliveryMatches(d, query)) && (cursor == 0 || d.ID <= cursor) {
				list = append(list, *d)
			}
		}
		perPage, _ := pageParams(query)
		if len(list) > perPage {
			next = map[string]string{"cursor": strconv.FormatInt(list[perPage].ID, 10)}
			list = list[:perPage]
		}
		return http.StatusOK, func(ex any) any {
			tmpl := ex.([]any)[0]
			out := []any{}
			for _, d := range list {
				out = append(out, deliveryJSON(tmpl, &d, false))
			}
			return out
		}, next
	case "get-webhook-delivery":
		id, _ := strconv.ParseInt(params["delivery_id"], 10, 64)
		for _, d := range s.deliveries {
			if d.ID == id && d.HookID == hookID {
				dc := *d
				return http.StatusOK, func(ex any) any { return deliveryJSON(ex, &dc, true) }, nil
			}
		}
		return http.StatusNotFound, func(any) any { return map[string]any{"message": "Not Found"} }, nil
	case "redeliver-webhook-delivery":
		id, _ := strconv.ParseInt(params["delivery_id"], 10, 64)
		for _, d := range s.deliveries {
			if d.ID == id && d.HookID == hookID {
				dc := *d
				*then = func() { s.deliver(dc.HookID, dc.Event, dc.Payload, dc.GUID) }
				return http.StatusAccepted, func(any) any { return map[string]any{} }, nil
			}
		}
		return http.StatusNotFound, func(any) any { return map[string]any{"message": "Not Found"} }, nil
	}
	s.t.Errorf("githubtest: operation %s is not served here", op)
	return http.StatusNotImplemented, nil, nil
}

// deliveryMatches applies the status filter (success: 200-399, failure:
// 400-599, per the description).
func deliveryMatches(d *HookDelivery, query map[string][]string) bool {
	switch first(query["status"]) {
	case "success":
		return d.Status >= 200 && d.Status < 400
	case "failure":
		return d.Status >= 400
	}
	return true
}

// pageParams reads per_page (GitHub's default 30) and page (from 1).
func pageParams(query map[string][]string) (perPage, page int) {
	perPage, err := strconv.Atoi(first(query["per_page"]))
	if err != nil || perPage < 1 {
		perPage = 30
	}
	page, err = strconv.Atoi(first(query["page"]))
	if err != nil || page < 1 {
		page = 1
	}
	return perPage, page
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// hookJSON is the description's example hook with h's values.
func hookJSON(tmpl any, h *Hook) any {
	m := clone(tmpl).(map[string]any)
	m["id"] = h.ID
	m["active"] = h.Active
	m["events"] = h.Events
	cfg, _ := m["config"].(map[string]any)
	if cfg == nil {
		cfg = map[string]any{}
	}
	cfg["url"] = h.URL
	cfg["content_type"] = "json"
	if h.Secret != "" {
		cfg["secret"] = "********"
	}
	m["config"] = cfg
	return m
}

// deliveryJSON is the description's example delivery with d's values.
func deliveryJSON(tmpl any, d *HookDelivery, detail bool) any {
	m := clone(tmpl).(map[string]any)
	m["id"] = d.ID
	m["guid"] = d.GUID
	m["delivered_at"] = d.At.Format(time.RFC3339)
	m["redelivery"] = d.Redelivery
	m["status_code"] = d.Status
	m["status"] = http.StatusText(d.Status)
	m["event"] = d.Event
	if d.Action != "" {
		m["action"] = d.Action
	} else {
		m["action"] = nil
	}
	if detail {
		headers := map[string]any{}
		for k, v := range d.Header {
			headers[k] = v
		}
		var payload any
		_ = json.Unmarshal(d.Payload, &payload)
		m["request"] = map[string]any{"headers": headers, "payload": payload}
	}
	return m
}

func clone(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// answer writes the operation's example for status, filled, after checking
// it against the description.
func (s *Server) answer(w http.ResponseWriter, in *openapi3filter.RequestValidationInput, status int, fill func(any) any) {
	var example any
	if resp := in.Route.Operation.Responses.Status(status); resp != nil && resp.Value != nil {
		if mt := resp.Value.Content.Get("application/json"); mt != nil {
			switch {
			case len(mt.Examples) > 0:
				name := "default"
				if _, ok := mt.Examples[name]; !ok {
					name = slices.Sorted(maps.Keys(mt.Examples))[0]
				}
				example = mt.Examples[name].Value.Value
			case mt.Example != nil:
				example = mt.Example
			}
		}
	}
	b, err := json.Marshal(fill(example))
	if err != nil {
		s.t.Errorf("githubtest: %v", err)
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: status,
		Header:  http.Header{"Content-Type": {"application/json; charset=utf-8"}},
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	out.SetBodyBytes(b)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		s.t.Errorf("githubtest: the %d answer to %s breaks GitHub's description: %v", status, in.Route.Operation.OperationID, err)
	}
	writeJSON(w, status, string(b))
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, body)
}
