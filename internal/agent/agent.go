// Package agent is hookline's MCP server (the Model Context Protocol that
// coding agents speak): the inspector's fix loop as tools an agent calls
// on the developer's machine. Find the delivery that failed, read what the
// server answered, replay it as it was or edited (signed again with the
// run's secret, by the run), send a test event, wait for the next
// delivery; every delivery is also a resource, updated when a replay of it
// finishes.
//
// It is a client of the inspector's HTTP API (docs/INSPECT.md), the one
// path the page and scripts use too: every rule of the inspector holds
// (the token, replays only to the run's own targets, the secret never
// leaves forward). Each tool call names itself in X-Hookline-Call on its
// first request, so forward's trace shows it as a line of its own. The
// protocol is the official Go SDK's (github.com/modelcontextprotocol/go-sdk).
//
// Decisions: tools return the inspector's JSON as it is (the API's names,
// documented in docs/INSPECT.md), with bodies paged (get_delivery's
// body_offset and body_limit) so that a 25 MiB delivery does not fill an
// agent's context; an edit is JSON Patch (add, replace, remove: RFC 6902,
// the form agents know), applied by the inspector member by member
// (webhookstest.Apply, as hookline send --set), or a whole body; ReadOnly
// leaves out the tools that send (replays and test events).
package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Endpoint is a running inspector: its base URL (http://127.0.0.1:4040)
// and the run's token.
type Endpoint struct {
	URL   string
	Token string
}

// Options configure a Server.
type Options struct {
	// Inspector returns the inspector a tool call goes to, or an error
	// that tells the agent what to do (no forward running). It is asked
	// at every call: forward may start after the agent.
	Inspector func() (Endpoint, error)
	// ReadOnly leaves out the tools that send: replay_delivery,
	// replay_edited and send_test_event.
	ReadOnly bool
	// Version is hookline's, given to clients.
	Version string
}

// Server is the MCP server; create it with New.
type Server struct {
	opts   Options
	mcp    *mcp.Server
	client http.Client // the API's; each call bounds its requests

	mu      sync.Mutex
	watched map[string]int // subscribed resource URIs, by count
	listed  []string       // the deliveries' resource URIs listed, oldest first (follow)
}

// Limits of the tools.
const (
	defaultBodyLimit = 16 << 10
	maxBodyLimit     = 1 << 20
	defaultList      = 20
	maxList          = 200
	defaultWait      = 60 * time.Second
	maxWait          = 10 * time.Minute
	callTimeout      = 2 * time.Minute // a replay waits for the target's answer and retries
)

// uriPrefix starts every delivery's resource URI: hookline://deliveries/ID.
const uriPrefix = "hookline://deliveries/"

// New returns a Server with opts.
func New(opts Options) *Server {
	s := &Server{opts: opts, watched: map[string]int{}}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "hookline", Title: "hookline inspector", Version: opts.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		SubscribeHandler: func(ctx context.Context, req *mcp.SubscribeRequest) error {
			return s.watch(req.Params.URI, 1)
		},
		UnsubscribeHandler: func(ctx context.Context, req *mcp.UnsubscribeRequest) error {
			return s.watch(req.Params.URI, -1)
		},
	})
	s.addTools()
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "delivery", Title: "A delivery the inspector keeps",
		URITemplate: uriPrefix + "{id}", MIMEType: "application/json",
		Description: "One delivery as get_delivery gives it (body up to 16 KiB); updated when a replay of it finishes (its replays list grows).",
	}, s.readResource)
	return s
}

const instructions = `hookline forwards webhook deliveries from a relay to the developer's local server and keeps each one with what the server answered. The fix loop: list_deliveries (outcome target-failed), get_delivery to read the request and the answer, change the handler's code, replay_delivery (or replay_edited, signed again by the run), check the new outcome. send_test_event makes any GitHub event.action; wait_for_delivery waits for one triggered elsewhere. Replays go only to the run's own targets; the secret never leaves hookline.`

// Run serves the protocol on t (standard input and output for hookline
// mcp) until the client leaves or ctx ends.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends follow
	go s.follow(ctx)
	return s.mcp.Run(ctx, t)
}

// MCP returns the SDK's server, to connect to another transport.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// errorAnswer is the inspector's error body.
type errorAnswer struct {
	Error string `json:"error"`
}

// call makes one API request: method on path (with the token), body as
// JSON when not nil; the answer is decoded into out. what, when not
// empty, names the tool call in X-Hookline-Call for forward's trace.
func (s *Server) call(ctx context.Context, what, method, path string, body, out any) error {
	ep, err := s.opts.Inspector()
	if err != nil {
		return err
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(ep.URL, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("X-Hookline-Token", ep.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if what != "" {
		req.Header.Set("X-Hookline-Call", what)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("the inspector at %s does not answer (%v): is hookline forward still running?", ep.URL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("reading the inspector's answer: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e errorAnswer
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return errors.New(e.Error)
		}
		return fmt.Errorf("the inspector answered %s", resp.Status)
	}
	return json.Unmarshal(data, out)
}

// caller names the client of req's session, for the trace: "claude-code"
// or "an MCP client".
func caller(req *mcp.CallToolRequest) string {
	if req != nil && req.Session != nil {
		if p := req.Session.InitializeParams(); p != nil && p.ClientInfo != nil && p.ClientInfo.Name != "" {
			return p.ClientInfo.Name
		}
	}
	return "an MCP client"
}

// deliveryURI is the resource URI of delivery id.
func deliveryURI(id int64) string { return uriPrefix + strconv.FormatInt(id, 10) }

// watch counts a subscription to uri (delta 1) or its end (-1).
func (s *Server) watch(uri string, delta int) error {
	if _, err := idOfURI(uri); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watched[uri] += delta; s.watched[uri] <= 0 {
		delete(s.watched, uri)
	}
	return nil
}

func idOfURI(uri string) (int64, error) {
	id, err := strconv.ParseInt(strings.TrimPrefix(uri, uriPrefix), 10, 64)
	if !strings.HasPrefix(uri, uriPrefix) || err != nil || id < 1 {
		return 0, fmt.Errorf("%q is not a delivery's URI (%sID)", uri, uriPrefix)
	}
	return id, nil
}

func (s *Server) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	id, err := idOfURI(req.Params.URI)
	if err != nil {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	d, err := s.delivery(ctx, "", id, 0, defaultBodyLimit)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}}, nil
}

// maxListed bounds the deliveries listed as resources (the inspector's
// default history).
const maxListed = 500

// follow lists the kept deliveries as resources, adds each new one (the
// SDK tells clients the list changed), and tells subscribed clients of the
// deliveries that change: a delivery whose replay finished (its replays
// list grew). It waits for new deliveries with the inspector's long poll
// (GET /api/deliveries?after=&wait=); while no inspector answers it tries
// again every few seconds, and a new run (another token) starts the list
// again.
func (s *Server) follow(ctx context.Context) {
	after, token := int64(-1), "" // not known yet
	for ctx.Err() == nil {
		if ep, err := s.opts.Inspector(); err == nil && ep.Token != token {
			after, token = -1, ep.Token // another run: its ids start again
			s.mu.Lock()
			old := s.listed
			s.listed = nil
			s.mu.Unlock()
			s.mcp.RemoveResources(old...)
		}
		var page struct {
			Deliveries []struct {
				ID       int64 `json:"id"`
				ReplayOf int64 `json:"replay_of"`
			} `json:"deliveries"`
		}
		q := url.Values{} // first, every delivery kept
		if after >= 0 {
			q.Set("after", strconv.FormatInt(after, 10))
			q.Set("wait", "30s")
		}
		if err := s.call(ctx, "", http.MethodGet, "/api/deliveries?"+q.Encode(), nil, &page); err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(3 * time.Second): // forward is not running (yet)
			}
			continue
		}
		after = max(after, 0)
		for i := len(page.Deliveries) - 1; i >= 0; i-- { // oldest first
			d := page.Deliveries[i]
			after = max(after, d.ID)
			s.listResource(d.ID)
			// In the first page too: a replay may finish between a
			// client's subscription and the first answer.
			if d.ReplayOf > 0 && s.subscribed(deliveryURI(d.ReplayOf)) {
				s.mcp.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: deliveryURI(d.ReplayOf)})
			}
		}
	}
}

// listResource adds delivery id to the resources, and takes out the oldest beyond
// maxListed.
func (s *Server) listResource(id int64) {
	uri := deliveryURI(id)
	s.mcp.AddResource(&mcp.Resource{URI: uri, Name: "delivery " + strconv.FormatInt(id, 10), MIMEType: "application/json"}, s.readResource)
	s.mu.Lock()
	s.listed = append(s.listed, uri)
	var gone []string
	if n := len(s.listed) - maxListed; n > 0 {
		gone = slices.Clone(s.listed[:n])
		s.listed = slices.Delete(s.listed, 0, n)
	}
	s.mu.Unlock()
	s.mcp.RemoveResources(gone...)
}

func (s *Server) subscribed(uri string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watched[uri] > 0
}
