package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fatih/color"
	ucli "github.com/urfave/cli/v2"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/bytesize"
	"github.com/hookline/hookline/internal/examples"
	"github.com/hookline/hookline/internal/jsonscan"
	"github.com/hookline/hookline/internal/wire"
	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/rest/header"
	"github.com/hookline/hookline/webhooks"
	"github.com/hookline/hookline/webhooks/provider"
	"github.com/hookline/hookline/webhooks/webhookstest"
)

// maxPayloadWarn is GitHub's cap on webhook payloads: send warns above it
// (and sends anyway, to test how a target handles it).
const maxPayloadWarn = 25 << 20

// eventHeader is the header that names another sender's event.
var eventHeader = map[provider.Scheme]string{
	provider.Gitea: "X-Gitea-Event", provider.Forgejo: "X-Forgejo-Event", provider.GitLab: "X-Gitlab-Event",
	provider.Bitbucket: "X-Event-Key", provider.Shopify: "X-Shopify-Topic",
}

// sendOptions are the parsed flags of `hookline send`.
type sendOptions struct {
	name        string                  // --event as given: event or event.action
	event       string                  // the X-GitHub-Event value
	action      string                  // the action asked for, if any
	example     []byte                  // the payload examples.Build made, used when payloadPath is ""
	exampleNote string                  // how it was made, when there was no example of its name
	payloadPath string                  // a file, "-" for stdin, or "" for the example
	from        *capture.File           // --from: a capture file's delivery as the payload
	overrides   []webhookstest.Override // --set, --set-json, --unset, in order
	overFlags   []string                // the flag that gave each override
	target      string
	viaRelay    bool // target is a relay channel (--url)
	secret      string
	scheme      provider.Scheme // --provider: how the delivery is signed and named
	header      http.Header     // --header; an empty value removes the header
	form        bool
	deliveryID  string
	timeout     time.Duration
	retries     int
	insecure    bool
}

// sendFlags are what send's flags hold that are not options yet.
type sendFlags struct {
	from            string
	set, setJSON    ucli.StringSlice
	unset           ucli.StringSlice
	secret          secretFlagValues
	provider        providerFlagValues
	target, channel string
	header          ucli.StringSlice
}

func sendCommand(s *streams) *ucli.Command {
	var o sendOptions
	var f sendFlags
	return &ucli.Command{
		Name:  "send",
		Usage: "send one webhook delivery, as GitHub would, to a local server or a relay channel",
		Description: `Builds a delivery the way GitHub does (a fresh X-GitHub-Delivery id,
X-GitHub-Event, X-GitHub-Hook-ID, the installation target headers that
match the payload, User-Agent GitHub-Hookshot/hookline, Content-Type
application/json, X-Hub-Signature-256 when a secret is given), sends it and
prints the answer.

The payload is --payload FILE (its exact bytes; - reads stdin) or a
built-in example of the event (compact JSON): hookline's own for ten
(repository octo-org/hello-world, sender octocat), @octokit/webhooks-
examples' for every other event and action it has (hookline events
--examples lists them). An event with one example needs no action
(--event issues sends issues.opened); one with several needs it (--event
pull_request.closed).

--target sends straight to your server; --url posts into a relay channel,
so the delivery travels the way GitHub's do (relay → forward → server).

   hookline send --event issues.opened --secret-file .secret --target http://127.0.0.1:3000/api/github/webhooks
   hookline send --event push --payload push.json --url https://smee.io/AbCdEf123`,
		Flags: append(append(secretFlags("sign with this webhook `SECRET`", &f.secret), providerFlags(&f.provider, "github", false)...),
			&ucli.StringFlag{Name: "event", Aliases: []string{"e"}, Usage: "event `NAME[.ACTION]` to send, such as push or issues.opened (see hookline events)", Destination: &o.name},
			&ucli.StringFlag{Name: "payload", Usage: "send the exact bytes of `FILE` (- for stdin) instead of the built-in example", TakesFile: true, Destination: &o.payloadPath},
			&ucli.StringFlag{Name: "from", Usage: "send the payload of the capture `FILE` (forward --save writes them) as the event it was", TakesFile: true, Destination: &f.from},
			&ucli.StringSliceFlag{Name: "set", Usage: "set the payload's field at `PATH=VALUE` (pull_request.number=7, commits.0.message=text), checked against GitHub's description; repeatable", Destination: &f.set},
			&ucli.StringSliceFlag{Name: "set-json", Usage: "set a field to a JSON value, `PATH=JSON` (objects, lists, null where allowed); repeatable", Destination: &f.setJSON},
			&ucli.StringSliceFlag{Name: "unset", Usage: "remove the payload's field at `PATH`; repeatable", Destination: &f.unset},
			&ucli.StringFlag{Name: "target", Aliases: []string{"t"}, Usage: "send to this `URL` (your webhook server)", Destination: &f.target},
			&ucli.StringFlag{Name: "url", Aliases: []string{"u"}, Usage: "post to this relay channel `URL` instead", Destination: &f.channel},
			&ucli.StringSliceFlag{Name: "header", Usage: "set header `NAME=VALUE` or \"NAME: VALUE\" (replaces hookline's, the signature included; NAME= removes it); repeatable", Destination: &f.header},
			&ucli.BoolFlag{Name: "form", Usage: "send application/x-www-form-urlencoded (payload=<JSON>), GitHub's other content type", Destination: &o.form},
			&ucli.StringFlag{Name: "delivery-id", Usage: "use this delivery `ID` instead of a random UUID (to test duplicate handling)", Destination: &o.deliveryID},
			&ucli.DurationFlag{Name: "timeout", Value: targetTimeout, Usage: "time limit of one request", Destination: &o.timeout},
			&ucli.IntFlag{Name: "retries", Value: 0, Usage: "retries of a transient failure (network error, 408, 429, 5xx), honouring Retry-After; none by default, as GitHub sends once", Destination: &o.retries},
			insecureFlag(&o.insecure),
		),
		Action: func(c *ucli.Context) error {
			opts, err := parseSend(c, o, &f)
			if err != nil {
				return errRedacted(err, opts.secret)
			}
			return errRedacted(runSend(c.Context, opts, s), opts.secret)
		},
	}
}

func parseSend(c *ucli.Context, o sendOptions, f *sendFlags) (sendOptions, error) {
	var err error
	if o.secret, err = readSecret(c, &f.secret); err != nil {
		return sendOptions{}, err
	}
	o.name = strings.TrimSpace(o.name)
	if f.from != "" {
		if o.payloadPath != "" {
			return o, usageErrorf("give --payload or --from, not both")
		}
		cf, err := capture.Read(f.from)
		if err != nil {
			return o, usageErrorf("--from: %v", err)
		}
		o.from = &cf
		if o.name == "" {
			o.name = cf.Event
			if cf.Action != "" {
				o.name += "." + cf.Action
			}
		}
	}
	for _, flag := range []struct {
		name   string
		values []string
	}{{"--set", f.set.Value()}, {"--set-json", f.setJSON.Value()}, {"--unset", f.unset.Value()}} {
		for _, v := range flag.values {
			ov := webhookstest.Override{Path: v, Unset: flag.name == "--unset"}
			if !ov.Unset {
				path, value, ok := strings.Cut(v, "=")
				if !ok || path == "" {
					return o, usageErrorf("%s %q: want PATH=VALUE, such as pull_request.number=7", flag.name, v)
				}
				ov.Path, ov.Text = path, value
				if flag.name == "--set-json" {
					ov.JSON = []byte(value)
				}
			}
			o.overrides, o.overFlags = append(o.overrides, ov), append(o.overFlags, flag.name)
		}
	}
	if c.NArg() > 0 {
		return o, usageErrorf("send takes no arguments (got %q); give the payload with --payload FILE", c.Args().First())
	}
	if o.scheme, err = f.provider.scheme(); err != nil || o.scheme == "" {
		if err == nil {
			err = usageErrorf("--provider auto: send signs for one sender; name it (github, stripe, standard...)")
		}
		return o, err
	}
	if o.scheme != provider.GitHub {
		// Another sender's delivery: its own payload, its event named or,
		// for Standard Webhooks and Stripe, the payload's type.
		if o.payloadPath == "" && o.from == nil {
			return o, usageErrorf("--provider %s: give the payload with --payload FILE (the built-in examples are GitHub's)", o.scheme)
		}
		if o.name == "" && o.scheme != provider.Standard && o.scheme != provider.Stripe {
			return o, usageErrorf("--provider %s needs --event NAME (its event header's value)", o.scheme)
		}
		o.event = o.name
	} else if o.name == "" {
		return o, usageErrorf("send needs --event NAME[.ACTION], such as --event issues.opened (hookline events lists them)")
	}
	var hasAction bool
	if o.scheme == provider.GitHub {
		if o.event, o.action, hasAction, err = githubEvent(o.name); err != nil {
			return o, err
		}
	}
	if o.payloadPath == "" && o.from == nil && o.scheme == provider.GitHub {
		if o.example, o.exampleNote, err = pickExample(o.event, o.action, hasAction); err != nil {
			return o, err
		}
	}

	target, channel := f.target, f.channel
	switch {
	case target != "" && channel != "":
		return o, usageErrorf("give --target (your server) or --url (a relay channel), not both")
	case target == "" && channel == "":
		return o, usageErrorf("send needs somewhere to send to: --target URL (your server) or --url CHANNEL (a relay channel)")
	case channel != "":
		if err := checkTarget("--url", channel); err != nil {
			return o, err
		}
		o.target = channel
		o.viaRelay = true
	default:
		if err := checkTarget("--target", target); err != nil {
			return o, err
		}
		o.target = target
	}

	if o.header, err = parseHeaders(f.header.Value()); err != nil {
		return o, err
	}
	if o.deliveryID != "" && !header.IsValue(o.deliveryID) {
		return o, usageErrorf("--delivery-id: the id contains control characters")
	}
	if o.timeout <= 0 {
		return o, usageErrorf("--timeout %v: must be positive", o.timeout)
	}
	if o.retries < 0 {
		return o, usageErrorf("--retries %d: must be 0 or more", o.retries)
	}
	return o, nil
}

// githubEvent splits a GitHub event name, NAME or NAME.ACTION (an action
// may hold dots: repository_dispatch.sample.collected), and checks it.
func githubEvent(name string) (event, action string, hasAction bool, err error) {
	event, action, hasAction = strings.Cut(name, ".")
	switch {
	case name == webhooks.AnyEventName || name == webhooks.ErrorEventName:
		err = usageErrorf("--event %q is not an event GitHub sends", name)
	case event == "" || (hasAction && action == ""):
		err = usageErrorf("--event %q: want NAME or NAME.ACTION, such as push or issues.opened", name)
	case !header.IsValue(name):
		err = usageErrorf("--event: the name contains control characters")
	}
	return event, action, hasAction, err
}

// testEvent makes a GitHub event.action as send does (its example, or one
// made from the payload type), with overrides, signed with secret: what
// forward's inspector sends into the run (inspect.Options.Build).
func testEvent(name string, overrides []webhookstest.Override, secret string) (*delivery.Delivery, error) {
	o := sendOptions{name: name, scheme: provider.GitHub, secret: secret, overrides: overrides}
	event, action, hasAction, err := githubEvent(name)
	if err != nil {
		return nil, err
	}
	o.event, o.action = event, action
	payload, _, err := pickExample(event, action, hasAction)
	if err != nil {
		return nil, err
	}
	return o.build(payload)
}

// pickExample returns the payload to send for event[.action] and how
// examples.Build made it: any event.action GitHub sends (made where there
// is no example), or the only example of an event given without an
// action.
func pickExample(event, action string, hasAction bool) (payload []byte, note string, err error) {
	name := event
	if hasAction {
		name += "." + action
		if payload, note, ok := examples.Build(name); ok {
			return payload, note, nil
		}
	}
	if webhooks.ValidateEventName(name, webhooks.ValidateOptions{}) != nil {
		if best := closest(name, webhooks.EmitterEventNames()); best != "" {
			return nil, "", usageErrorf("--event %s is not a GitHub event (did you mean %s?)", name, best)
		}
	}
	noPayload := usageErrorf("no payload for %s: --payload FILE sends any event with its payload (hookline events lists the events hookline makes one for)", name)
	if hasAction {
		return nil, "", noPayload
	}
	switch names := examples.ForEvent(event); len(names) {
	case 1:
		payload, note, _ := examples.Build(names[0])
		return payload, note, nil
	case 0:
	default:
		return nil, "", usageErrorf("%s has several built-in examples; name one with --event: %s", event, strings.Join(names, ", "))
	}
	var actions []string
	for _, n := range webhooks.EmitterEventNames() {
		if e, _, ok := strings.Cut(n, "."); ok && e == event {
			actions = append(actions, n)
		}
	}
	switch {
	case len(actions) == 1:
		return pickExample(event, strings.TrimPrefix(actions[0], event+"."), true)
	case len(actions) > 1:
		return nil, "", usageErrorf("%s has several actions; name one with --event: %s", event, strings.Join(actions, ", "))
	}
	return nil, "", noPayload
}

func runSend(ctx context.Context, o sendOptions, s *streams) error {
	warn := func(format string, a ...interface{}) {
		fmt.Fprintf(s.err, "%s %s\n", paint(s.errColor, color.FgYellow).Sprint("warning:"), fmt.Sprintf(format, a...))
	}
	if err := webhooks.ValidateEventName(o.name, webhooks.ValidateOptions{}); err != nil && o.scheme == provider.GitHub {
		warn("%q is not an event GitHub is known to send (hookline events lists them); sending it anyway", o.name)
	}

	var payload []byte
	switch {
	case o.from != nil:
		payload = o.from.Body
	case o.payloadPath == "":
		payload = o.example
		if o.exampleNote != "" {
			fmt.Fprintf(s.err, "%s %s\n", paint(s.errColor, color.FgYellow).Sprint("note:"), o.exampleNote)
		}
	default:
		var err error
		if payload, err = readInput(o.payloadPath, s); err != nil {
			return err
		}
		if o.scheme == provider.GitHub {
			checkPayload(payload, o, warn)
		}
	}
	d, err := o.build(payload)
	if err != nil {
		return err
	}
	o.event = d.Event // the payload's type, for another sender named by it
	if o.secret == "" && d.Headers.Get(webhooks.HeaderSignature256) == "" {
		fmt.Fprintf(s.err, "note: no secret, so the delivery is not signed; a server that checks X-Hub-Signature-256 will refuse it (give --secret, --secret-file or set %s)\n", secretEnv)
	}
	c, err := proxy.New(proxy.Options{
		Targets: []proxy.Target{{URL: o.target}}, HTTPClient: targetClient(o.timeout, o.retries, false, httpTransport(o.insecure, s), func(msg string) { fmt.Fprintln(s.err, msg) }),
		DedupWindow: -1, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return err
	}
	res := c.Handle(ctx, d)
	var answer *proxy.TargetResult
	if len(res.Targets) > 0 {
		answer = res.Targets[0]
	}
	return printSent(s, o, d, res.Action, answer)
}

// build makes the delivery send sends: payload with o's overrides, the
// sender's headers, signed with o.secret, then o.header. forward's
// inspector makes its test events with it too (testEvent).
func (o sendOptions) build(payload []byte) (*delivery.Delivery, error) {
	if len(o.overrides) > 0 {
		// Checked against the event's type from GitHub's description (the
		// event.action's when the payload has an action); another
		// sender's payload is not checked.
		pd := &delivery.Delivery{Body: slices.Clone(payload)}
		if o.scheme == provider.GitHub {
			pd.Event = o.event
		}
		for i, ov := range o.overrides {
			if err := webhookstest.Apply(pd, ov); err != nil {
				if i < len(o.overFlags) {
					return nil, usageErrorf("%s %v", o.overFlags[i], err)
				}
				return nil, err
			}
		}
		payload = pd.Body
	}

	body, contentType := payload, "application/json"
	if o.form {
		body = []byte("payload=" + url.QueryEscape(string(payload)))
		contentType = "application/x-www-form-urlencoded"
	}

	id := o.deliveryID
	if id == "" {
		id = delivery.NewID()
	}
	h := http.Header{}
	h.Set("Accept", "*/*")
	h.Set("User-Agent", wire.SendUserAgent)
	h.Set("Content-Type", contentType)
	if o.scheme == provider.GitHub {
		h.Set(webhooks.HeaderEvent, o.event)
		h.Set(webhooks.HeaderDelivery, id)
		// The hook's own headers, as GitHub sends them: the installation
		// target the payload names, and a stand-in id for the hook, the
		// same for every send about that target (a real hook is on one).
		typ, tid := installationTarget(payload)
		h.Set(webhooks.HeaderHookID, hookID(typ+" "+tid))
		if typ != "" {
			h.Set(webhooks.HeaderTargetType, typ)
			h.Set(webhooks.HeaderTargetID, tid)
		}
	} else if name := eventHeader[o.scheme]; name != "" {
		h.Set(name, o.event)
	}
	if o.secret != "" {
		signed, err := provider.Sign(o.scheme, o.secret, body, provider.Signing{ID: "msg_" + strings.ReplaceAll(id, "-", "")})
		if err != nil {
			return nil, usageErrorf("--secret for --provider %s: %v", o.scheme, err)
		}
		for k, vs := range signed {
			h[k] = vs
		}
	}
	if o.event == "" {
		o.event = provider.Event(o.scheme, h, body) // the payload's type
	}
	for name, vs := range o.header {
		if len(vs) == 1 && vs[0] == "" {
			h.Del(name)
		} else {
			h[name] = vs
		}
	}

	d := &delivery.Delivery{Event: o.event, Method: http.MethodPost, Headers: h, Body: body}
	d.Identify() // the sender's id (provider.DeliveryID), if it has one
	return d, nil
}

// hookID returns a stand-in X-GitHub-Hook-ID for deliveries about target:
// a number GitHub could have given, the same for every send about it.
func hookID(target string) string {
	h := fnv.New32a()
	h.Write([]byte(target))
	return strconv.FormatUint(uint64(h.Sum32()%900_000_000+100_000_000), 10)
}

// installationTarget returns the X-GitHub-Hook-Installation-Target-Type and
// -ID GitHub sends with payload: the App ("integration", installation's
// app_id) for an App's delivery, else the repository, else the
// organization the payload is about; "" when it names none.
func installationTarget(payload []byte) (typ, id string) {
	// number is the integer value of member name of the JSON object obj.
	number := func(obj []byte, name string) string {
		members, _ := jsonscan.Object(obj)
		v := ""
		for _, m := range members {
			if m.Is(name) && len(m.Value) > 0 && m.Value[0] >= '0' && m.Value[0] <= '9' {
				v = string(m.Value)
			}
		}
		return v
	}
	members, _ := jsonscan.Object(payload)
	found := map[string]string{}
	for _, m := range members {
		switch {
		case m.Is("installation"):
			found["integration"] = number(m.Value, "app_id")
		case m.Is("repository"):
			found["repository"] = number(m.Value, "id")
		case m.Is("organization"):
			found["organization"] = number(m.Value, "id")
		}
	}
	for _, typ := range []string{"integration", "repository", "organization"} {
		if found[typ] != "" {
			return typ, found[typ]
		}
	}
	return "", ""
}

// checkPayload warns about a --payload that GitHub would not send for the
// event asked for.
func checkPayload(p []byte, o sendOptions, warn func(string, ...interface{})) {
	if len(p) > maxPayloadWarn {
		warn("the payload is %s; GitHub never sends more than 25 MiB", bytesize.Format(int64(len(p))))
	}
	action, isObject := jsonscan.StringMember(p, "action")
	if !isObject {
		warn("the payload is not a JSON object; GitHub always sends one (sending it as it is)")
		return
	}
	got := string(action)
	switch {
	case o.action != "" && got == "":
		warn("--event %s asks for action %q, but the payload has no \"action\"", o.name, o.action)
	case o.action != "" && got != o.action:
		warn("--event %s asks for action %q, but the payload's action is %q; sending the payload as it is", o.name, o.action, got)
	}
}

// printSent prints the result line and returns the command's error.
func printSent(s *streams, o sendOptions, d *delivery.Delivery, action string, res *proxy.TargetResult) error {
	tr := newTracer(s.out, s.err, s.outColor, false, false, traceZone)
	green, yellow, red, dim := tr.green, tr.yellow, tr.red, tr.dim
	name := d.Event
	if action != "" {
		name += "." + action
	}
	where := "target"
	if o.viaRelay {
		where = "relay"
	}
	var status string
	switch {
	case res.Err != nil:
		status = red.Sprint("unreachable")
	case res.Status >= 200 && res.Status < 300:
		status = green.Sprintf("%d", res.Status)
	case res.Status >= 500:
		status = red.Sprintf("%d", res.Status)
	default:
		status = yellow.Sprintf("%d", res.Status)
	}
	id := "" // none for a delivery that carries no id
	if d.ID != "" {
		id = " " + dim.Sprint("delivery") + " " + termSafe(d.ID)
	}
	fmt.Fprintf(s.out, "%s %s%s %s %s %s\n", dim.Sprint("sent"), tr.families[family(d.Event)].Sprint(name),
		id, dim.Sprint("→ "+where), status, formatDuration(res.Duration))
	switch {
	case res.Err != nil:
		fmt.Fprintf(s.out, "    %s\n", red.Sprint(o.redact(res.Err.Error())))
		if hint := certHint(res.Err, where); hint != "" {
			return fmt.Errorf("could not reach %s: %s", res.URL, hint)
		}
		return fmt.Errorf("could not reach %s", res.URL)
	case o.viaRelay && nobodySubscribed(res.Body):
		// What a forward started later does is its state file's choice:
		// one that resumes the channel (the default with --url) reads what
		// the relay kept since it stopped; a first run, or --no-state,
		// starts with new deliveries.
		fmt.Fprintf(s.err, "%s nobody is subscribed to this channel right now. The relay keeps the delivery in its history: a forward that resumes this channel (the default: its state file remembers where it stopped) gets it when it starts; one started for the first time on it, or with --no-state, does not. Sending again would deliver it twice.\n", yellow.Sprint("note:"))
	case !res.OK():
		if b := strings.TrimSpace(shorten(string(res.Body), 300)); b != "" {
			fmt.Fprintf(s.out, "    %s\n", yellow.Sprint(o.redact(strings.ReplaceAll(b, "\n", " "))))
		}
		return fmt.Errorf("%s answered %d %s", res.URL, res.Status, http.StatusText(res.Status))
	}
	return nil
}

// nobodySubscribed reports whether a relay's answer to a POST says no
// stream got the delivery ({"id":N,"subscribers":0}, as hookline serve
// answers; other relays say nothing about it).
func nobodySubscribed(answer []byte) bool {
	var v struct {
		Subscribers *int `json:"subscribers"`
	}
	return json.Unmarshal(answer, &v) == nil && v.Subscribers != nil && *v.Subscribers == 0
}

// redact removes from text (a target's answer, an error) the secret and the
// credentials given with --header Authorization (or Proxy-Authorization,
// Cookie): a server that echoes its request must not make send print them.
func (o sendOptions) redact(text string) string {
	return redactEcho(text, []string{o.secret}, o.header)
}
