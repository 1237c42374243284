package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/hookline/hookline/internal/bytesize"
)

// The tools a trial can measure.
const (
	toolDirect   = "direct"   // the publisher POSTs straight to the target
	toolHookline = "hookline" // hookline serve + hookline forward
	toolSmee     = "smee"     // hookline serve + smee-client
	toolGosmee   = "gosmee"   // hookline serve + gosmee's client (on its gosmee stream)
	// hookline serve + hookline forward from the --compare binary (an
	// earlier build, say), alternating with the others.
	toolCompare = "compare"
	// The least one more hop can cost: a relay and a forwarder of a few
	// lines of net/http each (floor.go), no hookline code.
	toolFloor = "floor"
)

var allTools = []string{toolDirect, toolFloor, toolHookline, toolSmee, toolGosmee}

// gosmeeModule is the gosmee the harness builds when --gosmee is not given.
const gosmeeModule = "github.com/chmouel/gosmee@v0.32.0"

// scenario is one workload: N deliveries of Size bytes.
type scenario struct {
	Name string `json:"name"`
	N    int    `json:"n"`
	Size int    `json:"size"`
	// Rate is deliveries per second; 0 publishes as fast as the pipeline
	// takes them, with at most Window in flight (published, not yet at the
	// target).
	Rate       float64 `json:"rate"`
	Window     int     `json:"window"`
	Publishers int     `json:"publishers"` // concurrent POSTs
}

func (s scenario) describe() string {
	pace := fmt.Sprintf("as fast as possible (at most %d in flight, %d publishers)", s.Window, s.Publishers)
	if s.Rate > 0 {
		pace = fmt.Sprintf("at %g/s (%d publishers)", s.Rate, s.Publishers)
	}
	return fmt.Sprintf("%d × %s, %s", s.N, formatSize(s.Size), pace)
}

// defaultScenarios are what SPEC section 10 and issue 7 ask for.
var defaultScenarios = []scenario{
	{Name: "4KiB", N: 2000, Size: 4 << 10, Window: 512, Publishers: 4},
	{Name: "4KiB@500/s", N: 2000, Size: 4 << 10, Rate: 500, Publishers: 4},
	{Name: "1MiB", N: 100, Size: 1 << 20, Window: 8, Publishers: 2},
	{Name: "25MiB", N: 3, Size: 25 << 20, Window: 1, Publishers: 1},
}

// moreScenarios are chosen by name with --scenarios only: the loads of an
// independent harness's report (issue 39), to reproduce its figures, and
// the large bodies issue 53 asks for.
var moreScenarios = []scenario{
	// 3,000 published at once with nothing holding the publishers back:
	// the forwarder falls far behind, and the relay cuts it off.
	{Name: "burst", N: 3000, Size: 4 << 10, Window: 3000, Publishers: 16},
	{Name: "4KiB@1/s", N: 60, Size: 4 << 10, Rate: 1, Publishers: 1},
	{Name: "4KiB@20/s", N: 600, Size: 4 << 10, Rate: 20, Publishers: 1},
	// In order, 8 POSTs in flight and at most 64 published and not yet
	// at the target: a backlog a user's pipeline has, not a 512-deep one.
	{Name: "inorder", N: 2000, Size: 4 << 10, Window: 64, Publishers: 8},
	// Large bodies one at a time (issue 53's 5 and 20 MiB); both go by
	// link on hookline's stream, as every body of 1 MiB or more does.
	{Name: "5MiB", N: 20, Size: 5 << 20, Window: 1, Publishers: 1},
	{Name: "20MiB", N: 5, Size: 20 << 20, Window: 1, Publishers: 1},
}

// namedScenarios are the scenarios --scenarios takes: the default ones,
// then the others.
func namedScenarios() []scenario { return append(slices.Clip(defaultScenarios), moreScenarios...) }

// scenarioNames lists namedScenarios' names.
func scenarioNames() string {
	var names []string
	for _, s := range namedScenarios() {
		names = append(names, s.Name)
	}
	return strings.Join(names, ", ")
}

// quickScenarios are --quick's: a few hundred small deliveries and a few
// larger ones, enough to check correctness in the test suite.
var quickScenarios = []scenario{
	{Name: "quick-4KiB", N: 300, Size: 4 << 10, Window: 128, Publishers: 4},
	{Name: "quick-1MiB", N: 3, Size: 1 << 20, Window: 1, Publishers: 1},
}

// options are the parsed flags.
type options struct {
	scenarios     []scenario
	tools         []string
	rounds        int
	body          string // "json" or "binary"
	concurrency   int    // hookline forward --concurrency
	hookline      string // a prebuilt hookline binary; empty builds one
	compare       string // another hookline binary, measured as the tool "compare"
	node          string
	smee          string // smee.js; empty: interop/node_modules/smee-client/bin/smee.js
	gosmee        string // gosmee binary; empty: built from the module proxy
	stall         time.Duration
	profile       string // directory for pprof profiles of the hookline trials
	jsonOut       string // file for the raw results
	workDir       string
	verbose       bool
	trace         bool // with profile: execution traces too
	serveDefaults bool // serve with its own history limits, not the harness's
	dataDir       bool // serve --data-dir, a new directory per trial
	quick         bool
	moduleRoot    string // found with `go env GOMOD` when empty
	secret        string
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: go run ./cmd/hookline-bench [flags]\n\nWithout --n, --size or --rate it runs the default scenarios:")
		for _, s := range defaultScenarios {
			fmt.Fprintf(stderr, "  %-11s %s\n", s.Name, s.describe())
		}
		fmt.Fprintln(stderr, "\nMore scenarios, chosen by name with --scenarios (an independent harness's loads, and large bodies one at a time):")
		for _, s := range moreScenarios {
			fmt.Fprintf(stderr, "  %-11s %s\n", s.Name, s.describe())
		}
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	var (
		o        options
		n        = fs.Int("n", 0, "deliveries per trial (a custom scenario; default 2000)")
		size     = fs.String("size", "", "body size per delivery, such as 4KiB, 1MiB, 25MiB (a custom scenario; default 4KiB)")
		rate     = fs.Float64("rate", 0, "deliveries per second (a custom scenario); 0 publishes as fast as possible")
		window   = fs.Int("window", 0, "deliveries in flight at most when publishing as fast as possible (default 512, or 1 for bodies of 1 MiB and more)")
		pubs     = fs.Int("publishers", 0, "concurrent publishing POSTs (default 4, or 1 for bodies of 1 MiB and more)")
		tools    = fs.String("tools", strings.Join(allTools, ","), "tools to measure, comma-separated: direct (baseline), floor (the least a relay hop costs: a relay and a forwarder of a few lines of net/http), hookline, smee, gosmee, compare (the --compare binary)")
		scenName = fs.String("scenarios", "", "run only these scenarios, comma-separated ("+scenarioNames()+")")
	)
	fs.IntVar(&o.rounds, "rounds", 3, "rounds: every tool runs once per round, in a rotating order")
	fs.BoolVar(&o.quick, "quick", false, "a few hundred small deliveries and three of 1 MiB, one round: checks correctness (the test suite runs it)")
	fs.StringVar(&o.body, "body", "json", "body kind: json (compact GitHub-like JSON, which smee-client can relay byte-exact) or binary (random bytes, which it cannot)")
	fs.IntVar(&o.concurrency, "forward-concurrency", 1, "hookline forward --concurrency")
	fs.StringVar(&o.hookline, "hookline", "", "hookline binary to run (default: go build the module into the work directory)")
	fs.StringVar(&o.compare, "compare", "", "also measure the hookline binary at `PATH` (relay and forwarder), as the tool \"compare\": an earlier build, to see a change's effect under the same load")
	fs.StringVar(&o.node, "node", "node", "node binary for smee-client")
	fs.StringVar(&o.smee, "smee", "", "smee-client's bin/smee.js (default: interop/node_modules/smee-client/bin/smee.js)")
	fs.StringVar(&o.gosmee, "gosmee", "", "gosmee binary for the gosmee tool (default: go install "+gosmeeModule+" from the Go module proxy, or the tool is skipped)")
	fs.DurationVar(&o.stall, "stall", 30*time.Second, "give up on a trial when the target gets nothing new for this long; what is missing is lost")
	fs.StringVar(&o.profile, "profile", "", "write CPU and allocation profiles of the relay and the forwarder of each hookline trial to `DIR`")
	fs.BoolVar(&o.serveDefaults, "serve-defaults", false, "run hookline serve with its default history limits (the harness otherwise gives it room for every delivery of a trial)")
	fs.BoolVar(&o.dataDir, "data-dir", false, "run hookline serve with --data-dir (a new directory per trial): every delivery is on disk before its POST is answered")
	fs.BoolVar(&o.trace, "trace", false, "with --profile, also write execution traces (go tool trace) of the relay and the forwarder")
	fs.StringVar(&o.jsonOut, "json", "", "also write every trial's figures to `FILE` as JSON")
	fs.StringVar(&o.workDir, "workdir", "", "directory for the binary and the processes' logs (default: a temporary one, removed at the end)")
	fs.BoolVar(&o.verbose, "v", false, "print every trial's figures as it ends")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q; see --help", fs.Arg(0))
	}
	o.secret = "hookline-bench-secret"

	custom := *n != 0 || *size != "" || *rate != 0 || *window != 0 || *pubs != 0
	switch {
	case custom && (o.quick || *scenName != ""):
		return o, errors.New("--n, --size, --rate, --window and --publishers define one scenario; they do not go with --quick or --scenarios")
	case custom:
		s := scenario{Name: "custom", N: 2000, Size: 4 << 10, Rate: *rate}
		if *n != 0 {
			s.N = *n
		}
		if *size != "" {
			v, err := parseSize(*size)
			if err != nil {
				return o, fmt.Errorf("--size: %v", err)
			}
			s.Size = v
		}
		s.Window, s.Publishers = 512, 4
		if s.Size >= 1<<20 {
			s.Window, s.Publishers = 1, 1
		}
		if *window != 0 {
			s.Window = *window
		}
		if *pubs != 0 {
			s.Publishers = *pubs
		}
		if s.N < 1 || s.Size < 1 || s.Rate < 0 || s.Window < 1 || s.Publishers < 1 {
			return o, errors.New("--n, --size, --window and --publishers must be positive, --rate zero or positive")
		}
		s.Name = fmt.Sprintf("%s×%d", formatSize(s.Size), s.N)
		if s.Rate > 0 {
			s.Name += fmt.Sprintf("@%g/s", s.Rate)
		}
		o.scenarios = []scenario{s}
	case o.quick:
		o.scenarios = quickScenarios
		if !isFlagSet(fs, "rounds") {
			o.rounds = 1
		}
	case *scenName != "":
		for _, name := range strings.Split(*scenName, ",") {
			found := false
			for _, s := range namedScenarios() {
				if strings.EqualFold(s.Name, strings.TrimSpace(name)) {
					o.scenarios, found = append(o.scenarios, s), true
				}
			}
			if !found {
				return o, fmt.Errorf("--scenarios: no scenario %q (there are %s)", name, scenarioNames())
			}
		}
	default:
		o.scenarios = defaultScenarios
	}
	for _, t := range strings.Split(*tools, ",") {
		t = strings.TrimSpace(t)
		switch t {
		case toolDirect, toolHookline, toolSmee, toolCompare, toolGosmee, toolFloor:
			o.tools = append(o.tools, t)
		case "smee-client":
			o.tools = append(o.tools, toolSmee)
		case "":
		default:
			return o, fmt.Errorf("--tools: unknown tool %q (want direct, floor, hookline, smee, gosmee, compare)", t)
		}
	}
	if o.compare != "" && !slices.Contains(o.tools, toolCompare) {
		o.tools = append(o.tools, toolCompare)
	}
	if o.body == "binary" && slices.Contains(o.tools, toolFloor) {
		return o, errors.New("--tools floor: the floor relays JSON bodies only (an event's data is one line); leave it out with --body binary")
	}
	if len(o.tools) == 0 {
		return o, errors.New("--tools: name at least one tool")
	}
	if o.rounds < 1 {
		return o, errors.New("--rounds must be at least 1")
	}
	if o.body != "json" && o.body != "binary" {
		return o, fmt.Errorf("--body %q: want json or binary", o.body)
	}
	if o.concurrency < 1 {
		return o, errors.New("--forward-concurrency must be at least 1")
	}
	return o, nil
}

func isFlagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// parseSize reads a payload size (bytesize.Parse: 4096, 4KiB, 1MiB), at
// most 64 MiB.
func parseSize(s string) (int, error) {
	v, err := bytesize.Parse(s)
	if err != nil {
		return 0, err
	}
	if v > 64<<20 {
		return 0, fmt.Errorf("%q must be between 1 byte and 64 MiB", s)
	}
	return int(v), nil
}

func formatSize(n int) string { return bytesize.Format(int64(n)) }
