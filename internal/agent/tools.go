package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// filterArgs are the inspector list's filters, shared by list_deliveries
// and wait_for_delivery.
type filterArgs struct {
	Event   string `json:"event,omitempty" jsonschema:"an event (push) or event.action (issues.opened)"`
	Outcome string `json:"outcome,omitempty" jsonschema:"one of verified, unverified, bad-signature, target-failed, skipped, duplicate"`
	Text    string `json:"text,omitempty" jsonschema:"text to find in the delivery id, names, headers or body (any letter case)"`
}

func (f filterArgs) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"event": f.Event, "outcome": f.Outcome, "q": f.Text} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

func (f filterArgs) String() string {
	var parts []string
	for _, p := range [][2]string{{"event", f.Event}, {"outcome", f.Outcome}, {"text", f.Text}} {
		if p[1] != "" {
			parts = append(parts, p[0]+"="+strconv.Quote(p[1]))
		}
	}
	return strings.Join(parts, " ")
}

type listArgs struct {
	filterArgs
	Limit int `json:"limit,omitempty" jsonschema:"at most this many, newest first (default 20, at most 200)"`
}

type getArgs struct {
	ID         int64 `json:"id" jsonschema:"the delivery's number in the inspector (id in list_deliveries)"`
	BodyOffset int   `json:"body_offset,omitempty" jsonschema:"where the request body's page starts, in characters of body as given (text, or base64 when body_encoding says so)"`
	BodyLimit  int   `json:"body_limit,omitempty" jsonschema:"the page's length (default 16384, at most 1048576); each answer's body is cut to it too"`
}

// replayArgs name the delivery a replay repeats (replay_edited's too).
type replayArgs struct {
	ID  int64  `json:"id" jsonschema:"the delivery to replay (id in list_deliveries)"`
	URL string `json:"url,omitempty" jsonschema:"leave out: a replay goes to the run's own targets only (forward's --target and --route); a URL that is not one of them is refused"`
}

// patchOp is one JSON Patch operation (RFC 6902).
type patchOp struct {
	Op    string `json:"op" jsonschema:"add, replace or remove"`
	Path  string `json:"path" jsonschema:"a JSON Pointer to a member of the body, such as /issue/title or /commits/0/message"`
	Value any    `json:"value,omitempty" jsonschema:"the new value, any JSON (add, replace)"`
}

type editArgs struct {
	replayArgs
	Patch   []patchOp           `json:"patch,omitempty" jsonschema:"JSON Patch operations on the body, each checked against the event's payload type; only the members named change, byte for byte"`
	Body    *string             `json:"body,omitempty" jsonschema:"a whole new body, in place of the patch"`
	Headers map[string][]string `json:"headers,omitempty" jsonschema:"headers to set; an empty list removes one (the signature is made again by the run)"`
}

type sendArgs struct {
	Event string    `json:"event" jsonschema:"the event.action to send, such as issues.opened or push"`
	Patch []patchOp `json:"patch,omitempty" jsonschema:"JSON Patch operations on the example payload, checked against the event's payload type"`
}

type waitArgs struct {
	filterArgs
	TimeoutSeconds int `json:"timeout_seconds,omitempty" jsonschema:"how long to wait (default 60, at most 600)"`
}

// addTools registers the tools (those that send unless ReadOnly).
func (s *Server) addTools() {
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name: "list_deliveries", Title: "List deliveries",
		Description: "The deliveries this hookline forward run received, newest first, each with its verdict (verification) and every target's status: filter by event, outcome (target-failed: the local server refused it) or text.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.list)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name: "get_delivery", Title: "Get a delivery",
		Description: "One delivery whole: request headers and body (paged: body_offset, body_limit), the signature verdict, each target's attempts with the status, headers and body the server answered. The secret is never shown.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.get)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name: "wait_for_delivery", Title: "Wait for the next delivery",
		Description: "Waits for the next delivery that matches the filters (one arriving after the call) and returns it, or an empty list at the timeout: ask the developer to trigger the event, then wait.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.wait)
	if s.opts.ReadOnly {
		return
	}
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name: "replay_delivery", Title: "Replay a delivery",
		Description: "Sends a delivery again, byte for byte, through the run's pipeline (verification, plugins, the run's own targets) and returns the new delivery with its outcome.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false)},
	}, s.replay)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name: "replay_edited", Title: "Replay a delivery edited",
		Description: "Sends a delivery again with its body patched (JSON Patch: add, replace, remove) or replaced, and headers set; the run signs it again with its secret in the sender's scheme, so the server's verification passes. Returns the new delivery with its outcome.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false)},
	}, s.replayEdited)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name: "send_test_event", Title: "Send a test event",
		Description: "Makes any GitHub event.action as hookline send does (GitHub's example, or one made from the payload's type), patched, signed with the run's secret, and runs it through the run to its targets; returns the delivery with its outcome.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false)},
	}, s.send)
}

func ptr[T any](v T) *T { return &v }

// page is an inspector list answer, kept as JSON but for what the tools
// read.
type page struct {
	Deliveries []json.RawMessage `json:"deliveries"`
	Counts     map[string]int    `json:"counts"`
	Evicted    int64             `json:"evicted"`
}

func (s *Server) list(ctx context.Context, req *mcp.CallToolRequest, a listArgs) (*mcp.CallToolResult, any, error) {
	limit := a.Limit
	if limit <= 0 {
		limit = defaultList
	}
	limit = min(limit, maxList)
	var p page
	if err := s.call(ctx, caller(req)+": list_deliveries "+a.filterArgs.String(), http.MethodGet, "/api/deliveries?"+a.query().Encode(), nil, &p); err != nil {
		return nil, nil, err
	}
	total := len(p.Deliveries)
	if total > limit {
		p.Deliveries = p.Deliveries[:limit]
	}
	return nil, map[string]any{"deliveries": p.Deliveries, "matching": total, "counts": p.Counts, "evicted": p.Evicted}, nil
}

func (s *Server) get(ctx context.Context, req *mcp.CallToolRequest, a getArgs) (*mcp.CallToolResult, any, error) {
	limit := a.BodyLimit
	if limit <= 0 {
		limit = defaultBodyLimit
	}
	d, err := s.delivery(ctx, fmt.Sprintf("%s: get_delivery #%d", caller(req), a.ID), a.ID, a.BodyOffset, min(limit, maxBodyLimit))
	return nil, d, err
}

// delivery returns delivery id's detail with its request body cut to
// [offset, offset+limit) and each answer's body to limit.
func (s *Server) delivery(ctx context.Context, what string, id int64, offset, limit int) (map[string]any, error) {
	var d map[string]any
	if err := s.call(ctx, what, http.MethodGet, "/api/deliveries/"+strconv.FormatInt(id, 10), nil, &d); err != nil {
		return nil, err
	}
	pageBodies(d, offset, limit)
	return d, nil
}

// bodyPage says which part of a body a tool gives.
type bodyPage struct {
	Offset     int  `json:"offset"`
	Length     int  `json:"length"`
	Total      int  `json:"total"`
	NextOffset *int `json:"next_offset,omitempty"` // where the next page starts, if there is more
}

// cut returns body[offset:offset+limit], its ends moved back to the start
// of a character, and where it is.
func cut(body string, offset, limit int) (string, bodyPage) {
	start := min(max(offset, 0), len(body))
	for start > 0 && start < len(body) && !utf8.RuneStart(body[start]) {
		start--
	}
	end := min(start+limit, len(body))
	for end > start && end < len(body) && !utf8.RuneStart(body[end]) {
		end--
	}
	p := bodyPage{Offset: start, Length: end - start, Total: len(body)}
	if end < len(body) {
		p.NextOffset = &end
	}
	return body[start:end], p
}

func (s *Server) wait(ctx context.Context, req *mcp.CallToolRequest, a waitArgs) (*mcp.CallToolResult, any, error) {
	timeout := time.Duration(a.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = defaultWait
	}
	timeout = min(timeout, maxWait)
	q := a.query()
	q.Set("after", "latest") // the newest when the inspector takes the request
	q.Set("wait", timeout.String())
	var p page
	what := fmt.Sprintf("%s: wait_for_delivery %s (up to %s)", caller(req), a.filterArgs.String(), timeout)
	if err := s.call(ctx, what, http.MethodGet, "/api/deliveries?"+q.Encode(), nil, &p); err != nil {
		return nil, nil, err
	}
	out := map[string]any{"deliveries": p.Deliveries}
	if len(p.Deliveries) == 0 {
		out["timed_out"] = true
		out["note"] = fmt.Sprintf("no matching delivery in %s", timeout)
	}
	return nil, out, nil
}

func (s *Server) replay(ctx context.Context, req *mcp.CallToolRequest, a replayArgs) (*mcp.CallToolResult, any, error) {
	if err := s.ownTarget(ctx, a.URL); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var d map[string]any
	err := s.call(ctx, fmt.Sprintf("%s: replay_delivery #%d", caller(req), a.ID), http.MethodPost, fmt.Sprintf("/api/deliveries/%d/replay", a.ID), struct{}{}, &d)
	return nil, trim(d), err
}

func (s *Server) replayEdited(ctx context.Context, req *mcp.CallToolRequest, a editArgs) (*mcp.CallToolResult, any, error) {
	if a.Body == nil && len(a.Patch) == 0 && len(a.Headers) == 0 {
		return nil, nil, fmt.Errorf("give patch, body or headers to change (or use replay_delivery to replay it as it was)")
	}
	if a.Body != nil && len(a.Patch) > 0 {
		return nil, nil, fmt.Errorf("give patch or body, not both")
	}
	if err := s.ownTarget(ctx, a.URL); err != nil {
		return nil, nil, err
	}
	edit := map[string]any{"resign": true}
	var changed []string
	if a.Body != nil {
		edit["body"] = *a.Body
		changed = append(changed, "body")
	}
	if len(a.Patch) > 0 {
		edit["patch"] = a.Patch
		for _, op := range a.Patch {
			changed = append(changed, op.Op+" "+op.Path)
		}
	}
	if len(a.Headers) > 0 {
		edit["headers"] = a.Headers
		for k := range a.Headers {
			changed = append(changed, "header "+k)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var d map[string]any
	err := s.call(ctx, fmt.Sprintf("%s: replay_edited #%d (%s)", caller(req), a.ID, strings.Join(changed, ", ")), http.MethodPost, fmt.Sprintf("/api/deliveries/%d/replay", a.ID), edit, &d)
	return nil, trim(d), err
}

func (s *Server) send(ctx context.Context, req *mcp.CallToolRequest, a sendArgs) (*mcp.CallToolResult, any, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var d map[string]any
	what := fmt.Sprintf("%s: send_test_event %s", caller(req), a.Event)
	if len(a.Patch) > 0 {
		what += fmt.Sprintf(" (%d patch operations)", len(a.Patch))
	}
	err := s.call(ctx, what, http.MethodPost, "/api/send", map[string]any{"event": a.Event, "patch": a.Patch}, &d)
	return nil, trim(d), err
}

// ownTarget refuses a replay's url unless it is one of the run's targets
// (the inspector's list names them), saying why.
func (s *Server) ownTarget(ctx context.Context, u string) error {
	if u == "" {
		return nil
	}
	var p struct {
		Target     string `json:"target"`
		Deliveries []struct {
			Targets []struct {
				URL string `json:"url"`
			} `json:"targets"`
		} `json:"deliveries"`
	}
	if err := s.call(ctx, "", http.MethodGet, "/api/deliveries", nil, &p); err != nil {
		return err
	}
	own := map[string]bool{}
	if p.Target != "" {
		own[p.Target] = true
	}
	for _, d := range p.Deliveries {
		for _, t := range d.Targets {
			own[t.URL] = true
		}
	}
	if own[u] {
		return nil
	}
	names := slices.Sorted(maps.Keys(own))
	return fmt.Errorf("refused: a replay goes only to this run's own targets (%s), and %s is not one of them; hookline never sends a delivery, signed with the run's secret, anywhere else. To use another server, restart forward with --target %s", strings.Join(names, ", "), u, u)
}

// trim cuts the bodies of a detail a replay or a send returns, as
// get_delivery does by default.
func trim(d map[string]any) map[string]any {
	if d != nil {
		pageBodies(d, 0, defaultBodyLimit)
	}
	return d
}

// pageBodies cuts detail d's request body to [offset, offset+limit) and
// each answer's body to limit, saying where each page is (body_page).
func pageBodies(d map[string]any, offset, limit int) {
	if r, ok := d["request"].(map[string]any); ok {
		body, _ := r["body"].(string)
		r["body"], r["body_page"] = cut(body, offset, limit)
	}
	targets, _ := d["targets"].([]any)
	for _, t := range targets {
		tm, _ := t.(map[string]any)
		attempts, _ := tm["attempts"].([]any)
		for _, a := range attempts {
			am, _ := a.(map[string]any)
			if resp, ok := am["response"].(map[string]any); ok {
				body, _ := resp["body"].(string)
				resp["body"], resp["body_page"] = cut(body, 0, limit)
			}
		}
	}
}
