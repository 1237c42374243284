// Package githubapi calls the part of GitHub's REST API that hookline
// needs: a repository's or organisation's webhooks (list, create, update,
// delete), a GitHub App's one webhook (its configuration: TheApp), the
// deliveries of either (list, fetch, redeliver), and the exchange of an App
// manifest's code for the App's credentials. It sends every request through
// package rest, with a token (a user's, or the App's JSON Web Token signed
// by App), and turns GitHub's refusals into one-line errors that say what
// to do.
//
//	c := &githubapi.Client{Token: token}
//	hook, err := c.CreateHook(ctx, githubapi.Repo("octo/hello"), githubapi.HookConfig{URL: channel, Secret: secret}, []string{"*"})
//
// Rate limits: an answer that says the token's limit is used up
// (X-RateLimit-Remaining: 0, until X-RateLimit-Reset) or that asks to slow
// down (a secondary limit: Retry-After, or GitHub's "wait a minute") is
// waited out when the wait is at most Client.MaxWait, with a note through
// Client.Notify, and otherwise returned as an error wrapping
// ErrRateLimited that names the time to try again. 429s and 5xx answers are
// retried by rest's RetryPolicy.
package githubapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/rest"
	"github.com/hookline/hookline/rest/backoff"
	"github.com/hookline/hookline/rest/header"
)

// DefaultBaseURL is GitHub's API; GitHub Enterprise Server's is
// https://HOST/api/v3.
const DefaultBaseURL = "https://api.github.com"

// apiVersion is the REST API version hookline is written against.
const apiVersion = "2022-11-28"

// Errors that GitHub's answers wrap; each *Error says more.
var (
	ErrUnauthorized = errors.New("GitHub refused the token")
	ErrForbidden    = errors.New("GitHub refused the request")
	ErrNotFound     = errors.New("GitHub found nothing there")
	ErrRateLimited  = errors.New("GitHub's rate limit")
	ErrInvalid      = errors.New("GitHub refused the request's content")
	ErrUnexpected   = errors.New("GitHub answered something unexpected")
)

// Owner is whose webhooks: a repository ("owner/name"), an organisation, or
// the GitHub App of the Client's App (TheApp), whose one webhook has no id.
type Owner struct {
	Repo string // "owner/name"
	Org  string
	App  bool
}

// Repo is the Owner for repository "owner/name".
func Repo(fullName string) Owner { return Owner{Repo: fullName} }

// Org is the Owner for organisation org.
func Org(org string) Owner { return Owner{Org: org} }

// validName reports whether s is a name GitHub allows for an owner or a
// repository: 1 to 100 letters, digits, '.', '_' and '-', the first a
// letter or digit. (As a regexp, `{0,99}` compiled into a program of a
// hundred copies at every start of every command: 1.3 ms and 97 KB.)
func validName(s string) bool {
	if s == "" || len(s) > 100 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// Check reports whether o names one repository or one organisation in the
// form GitHub allows.
func (o Owner) Check() error {
	switch {
	case o.Repo != "" && o.Org != "", o.App && (o.Repo != "" || o.Org != ""):
		return errors.New("give a repository, an organisation or the App, one of them")
	case o.App:
	case o.Org != "":
		if !validName(o.Org) {
			return fmt.Errorf("organisation %q: want a name such as my-org", o.Org)
		}
	case o.Repo != "":
		owner, name, ok := strings.Cut(o.Repo, "/")
		if !ok || !validName(owner) || !validName(name) {
			return fmt.Errorf("repository %q: want OWNER/NAME, such as octo/hello", o.Repo)
		}
	default:
		return errors.New("no repository or organisation")
	}
	return nil
}

func (o Owner) String() string {
	if o.App {
		return "the GitHub App"
	}
	if o.Org != "" {
		return "organisation " + o.Org
	}
	return o.Repo
}

func (o Owner) path() string {
	if o.App {
		return "/app"
	}
	if o.Org != "" {
		return "/orgs/" + url.PathEscape(o.Org)
	}
	owner, name, _ := strings.Cut(o.Repo, "/")
	return "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name)
}

// hookPath is the path of o's webhook id (the App's one webhook has none).
func (o Owner) hookPath(id int64) string {
	if o.App {
		return "/app/hook"
	}
	return o.path() + "/hooks/" + strconv.FormatInt(id, 10)
}

// scope is the classic token scope that manages o's webhooks.
func (o Owner) scope() string {
	if o.Org != "" {
		return "admin:org_hook"
	}
	return "admin:repo_hook"
}

// Client calls the API. The zero value calls api.github.com without a token
// (which GitHub refuses for webhooks).
type Client struct {
	BaseURL string       // if empty, DefaultBaseURL
	Token   string       // sent as a bearer token, never printed
	App     *App         // signs the token of TheApp's requests
	REST    *rest.Client // if nil, one with a retry policy
	// MaxWait is the longest rate-limit wait sat out before an error; if
	// zero, 90 seconds.
	MaxWait time.Duration
	// Notify, if set, is told about each wait, in one line.
	Notify func(string)
	// PerPage is the page size of lists; if zero, 100 (GitHub's largest).
	PerPage int

	// Sleep waits out a rate limit; if nil, the real clock (tests give
	// their own).
	Sleep func(context.Context, time.Duration) error
}

func (c *Client) perPage() string {
	if c.PerPage > 0 {
		return strconv.Itoa(c.PerPage)
	}
	return "100"
}

var defaultREST = &rest.Client{Retry: RetryPolicy()}

// RetryPolicy is the retry policy for GitHub's API: rest's rule, except
// that a 429 is not retried by rest, since the Client waits out rate limits
// itself, with GitHub's reset time and up to MaxWait (rest retrying it
// first waited twice for one limit).
func RetryPolicy() *rest.RetryPolicy {
	return &rest.RetryPolicy{Retryable: func(resp *http.Response, err error) bool {
		if resp != nil && resp.StatusCode == http.StatusTooManyRequests {
			return false
		}
		return rest.DefaultRetryable(resp, err)
	}}
}

// do sends one request and decodes a 2xx JSON answer into out (unless nil).
// It returns the response for its headers.
func (c *Client) do(ctx context.Context, o Owner, method, path string, query map[string]string, in, out any) (*rest.Response, error) {
	base := strings.TrimSuffix(c.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	req := rest.Request{
		Method:      rest.Method(method),
		BaseURL:     base + path,
		QueryParams: query,
		Headers: map[string]string{
			"Accept":               "application/vnd.github+json",
			"X-GitHub-Api-Version": apiVersion,
			"User-Agent":           "hookline",
		},
	}
	if o.App && c.App == nil {
		return nil, errors.New("the App's endpoints need the App's ID and private key (Client.App)")
	}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		req.Body = b
	}
	rc := c.REST
	if rc == nil {
		rc = defaultREST
	}
	adjusted := false
	for waits := 0; ; waits++ {
		sent := time.Now()
		if err := c.authorize(o, req.Headers); err != nil {
			return nil, err
		}
		resp, err := rc.SendWithContext(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, req.BaseURL, err)
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			if out != nil && resp.StatusCode != http.StatusNoContent {
				if err := json.Unmarshal([]byte(resp.Body), out); err != nil {
					return resp, &Error{Method: method, Path: path, Status: resp.StatusCode, Message: "the answer is not the JSON expected: " + err.Error(), err: ErrUnexpected}
				}
			}
			return resp, nil
		}
		e := newError(method, path, o, resp)
		if o.App {
			e.Hint = appHint(resp.StatusCode, e.Message, c.App.ID)
			if resp.StatusCode == http.StatusUnauthorized && timeClaimRefused(e.Message) {
				skew, known := c.App.adjust(http.Header(resp.Headers).Get("Date"), sent)
				if known && !adjusted {
					adjusted = true
					if c.Notify != nil {
						c.Notify(fmt.Sprintf("%s: hookline signs the App's token on GitHub's time (set the clock: timedatectl set-ntp true)", describeSkew(skew)))
					}
					continue
				}
				if known || skew != 0 {
					e.Hint = describeSkew(skew) + "; " + e.Hint
				}
			}
		}
		if wait, limited := rateLimited(resp, time.Now()); limited {
			maxWait := c.MaxWait
			if maxWait == 0 {
				maxWait = 90 * time.Second
			}
			if wait > maxWait || waits >= 3 {
				e.err = ErrRateLimited
				e.Hint = fmt.Sprintf("the token's rate limit is used up; try again after %s", time.Now().Add(wait).Format("15:04:05"))
				return resp, e
			}
			if c.Notify != nil {
				c.Notify(fmt.Sprintf("GitHub's rate limit: waiting %s before %s %s", wait.Round(time.Second), method, path))
			}
			sleep := c.Sleep
			if sleep == nil {
				sleep = backoff.Sleep
			}
			if err := sleep(ctx, wait); err != nil {
				return resp, err
			}
			continue
		}
		return resp, e
	}
}

// authorize sets the Authorization header of a request for o: the App's
// token for TheApp, else the Client's token, if any.
func (c *Client) authorize(o Owner, h map[string]string) error {
	switch {
	case o.App:
		token, err := c.App.JWT()
		if err != nil {
			return err
		}
		h["Authorization"] = "Bearer " + token
	case c.Token != "":
		h["Authorization"] = "Bearer " + c.Token
	}
	return nil
}

// rateLimited reports whether resp is a rate-limit refusal and how long to
// wait (GitHub's "Rate limits for the REST API": a primary limit says when
// it resets, a secondary one may give Retry-After, else wait a minute).
func rateLimited(resp *rest.Response, now time.Time) (time.Duration, bool) {
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests {
		return 0, false
	}
	h := http.Header(resp.Headers)
	if d, ok := header.RetryAfter(h.Get("Retry-After"), now); ok {
		return d, true
	}
	if h.Get("X-RateLimit-Remaining") == "0" {
		if reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			return max(time.Unix(reset, 0).Sub(now), 0) + time.Second, true
		}
		return time.Minute, true
	}
	if strings.Contains(strings.ToLower(resp.Body), "secondary rate limit") {
		return time.Minute, true
	}
	return 0, false
}

// Error is a refusal from GitHub.
type Error struct {
	Method, Path string
	Status       int
	Message      string // GitHub's message, with its errors' messages
	Hint         string // what to do
	err          error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("GitHub: %s %s: %d", e.Method, e.Path, e.Status)
	if e.Message != "" {
		s += " " + e.Message
	}
	if e.Hint != "" {
		s += ": " + e.Hint
	}
	return s
}

func (e *Error) Unwrap() error { return e.err }

func newError(method, path string, o Owner, resp *rest.Response) *Error {
	var body struct {
		Message string `json:"message"`
		Errors  []struct {
			Message string `json:"message"`
			Code    string `json:"code"`
			Field   string `json:"field"`
		} `json:"errors"`
	}
	_ = json.Unmarshal([]byte(resp.Body), &body)
	msg := strings.Join(strings.Fields(body.Message), " ")
	for _, e := range body.Errors {
		if e.Message != "" {
			msg += " (" + e.Message + ")"
		} else if e.Field != "" {
			msg += " (" + e.Field + " " + e.Code + ")"
		}
	}
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	e := &Error{Method: method, Path: path, Status: resp.StatusCode, Message: msg}
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		e.err = ErrUnauthorized
		e.Hint = "set GITHUB_TOKEN or GH_TOKEN to a valid token, or run gh auth login"
	case http.StatusForbidden:
		e.err = ErrForbidden
		e.Hint = fmt.Sprintf("the token needs the %s scope (a fine-grained token: the Webhooks permission, read and write) and admin rights on %s", o.scope(), o)
	case http.StatusNotFound:
		e.err = ErrNotFound
		e.Hint = fmt.Sprintf("check %s exists and the token can see it (GitHub answers 404, not 403, to a token without access; it needs the %s scope)", o, o.scope())
	case http.StatusUnprocessableEntity, http.StatusBadRequest:
		e.err = ErrInvalid
	default:
		e.err = ErrUnexpected
	}
	return e
}

// Hook is a webhook.
type Hook struct {
	ID     int64      `json:"id"`
	Name   string     `json:"name,omitempty"`
	Active bool       `json:"active"`
	Events []string   `json:"events"`
	Config HookConfig `json:"config"`
}

// HookConfig is a webhook's configuration. GitHub never returns the
// secret, only "********" when one is set.
type HookConfig struct {
	URL         string `json:"url,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	Secret      string `json:"secret,omitempty"`
	InsecureSSL string `json:"insecure_ssl,omitempty"`
}

// Hooks lists o's webhooks, every page.
func (c *Client) Hooks(ctx context.Context, o Owner) ([]Hook, error) {
	var all []Hook
	query := map[string]string{"per_page": c.perPage()}
	for page := 1; ; page++ {
		query["page"] = strconv.Itoa(page)
		var hooks []Hook
		resp, err := c.do(ctx, o, http.MethodGet, o.path()+"/hooks", query, nil, &hooks)
		if err != nil {
			return nil, err
		}
		all = append(all, hooks...)
		if _, ok := nextLink(resp)["page"]; !ok || len(hooks) == 0 {
			return all, nil
		}
	}
}

// CreateHook creates a JSON webhook on o for events ("*" for all).
func (c *Client) CreateHook(ctx context.Context, o Owner, cfg HookConfig, events []string) (Hook, error) {
	if cfg.ContentType == "" {
		cfg.ContentType = "json"
	}
	in := map[string]any{"name": "web", "active": true, "events": events, "config": cfg}
	var h Hook
	_, err := c.do(ctx, o, http.MethodPost, o.path()+"/hooks", nil, in, &h)
	return h, err
}

// UpdateHook replaces webhook id's configuration and events and activates
// it.
func (c *Client) UpdateHook(ctx context.Context, o Owner, id int64, cfg HookConfig, events []string) (Hook, error) {
	if cfg.ContentType == "" {
		cfg.ContentType = "json"
	}
	in := map[string]any{"active": true, "events": events, "config": cfg}
	var h Hook
	_, err := c.do(ctx, o, http.MethodPatch, o.hookPath(id), nil, in, &h)
	return h, err
}

// DeleteHook deletes webhook id.
func (c *Client) DeleteHook(ctx context.Context, o Owner, id int64) error {
	_, err := c.do(ctx, o, http.MethodDelete, o.hookPath(id), nil, nil, nil)
	return err
}

// Delivery is one delivery of a webhook, as listed.
type HookDelivery struct {
	ID          int64     `json:"id"`
	GUID        string    `json:"guid"`
	DeliveredAt time.Time `json:"delivered_at"`
	Redelivery  bool      `json:"redelivery"`
	Status      string    `json:"status"`
	StatusCode  int       `json:"status_code"`
	Event       string    `json:"event"`
	Action      *string   `json:"action"`
}

// Name is the delivery's event or event.action name.
func (d HookDelivery) Name() string {
	if d.Action != nil && *d.Action != "" {
		return d.Event + "." + *d.Action
	}
	return d.Event
}

// HookDeliveryDetail is a delivery with the request GitHub sent.
type HookDeliveryDetail struct {
	HookDelivery
	Request struct {
		Headers map[string]any  `json:"headers"`
		Payload json.RawMessage `json:"payload"`
	} `json:"request"`
}

// Deliveries calls each with o's webhook hookID's deliveries, newest first,
// page by page (the Link header's cursor), until each returns false or
// there are no more. status, if not empty, is "success" or "failure".
func (c *Client) Deliveries(ctx context.Context, o Owner, hookID int64, status string, each func(HookDelivery) bool) error {
	query := map[string]string{"per_page": c.perPage()}
	if status != "" {
		query["status"] = status
	}
	for {
		var page []HookDelivery
		resp, err := c.do(ctx, o, http.MethodGet, o.hookPath(hookID)+"/deliveries", query, nil, &page)
		if err != nil {
			return err
		}
		for _, d := range page {
			if !each(d) {
				return nil
			}
		}
		cursor, ok := nextLink(resp)["cursor"]
		if !ok || cursor == "" || len(page) == 0 {
			return nil
		}
		query["cursor"] = cursor
	}
}

// Delivery fetches delivery id of o's webhook hookID with its request.
func (c *Client) Delivery(ctx context.Context, o Owner, hookID, id int64) (HookDeliveryDetail, error) {
	var d HookDeliveryDetail
	_, err := c.do(ctx, o, http.MethodGet, o.hookPath(hookID)+"/deliveries/"+strconv.FormatInt(id, 10), nil, nil, &d)
	return d, err
}

// Redeliver asks GitHub to send delivery id of o's webhook hookID again.
func (c *Client) Redeliver(ctx context.Context, o Owner, hookID, id int64) error {
	_, err := c.do(ctx, o, http.MethodPost, o.hookPath(hookID)+"/deliveries/"+strconv.FormatInt(id, 10)+"/attempts", nil, nil, nil)
	return err
}

// nextLink is the query of the Link header's rel="next" URL.
func nextLink(resp *rest.Response) map[string]string {
	for _, v := range http.Header(resp.Headers).Values("Link") {
		for part := range strings.SplitSeq(v, ",") {
			target, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if !strings.Contains(params, `rel="next"`) {
				continue
			}
			u, err := url.Parse(strings.Trim(strings.TrimSpace(target), "<>"))
			if err != nil {
				return nil
			}
			out := map[string]string{}
			for k, vs := range u.Query() {
				out[k] = vs[0]
			}
			return out
		}
	}
	return nil
}
