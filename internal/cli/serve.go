package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/fatih/color"
	ucli "github.com/urfave/cli/v2"

	"github.com/hookline/hookline/internal/bytesize"
	"github.com/hookline/hookline/internal/canary"
	"github.com/hookline/hookline/internal/httpx"
	"github.com/hookline/hookline/internal/metrics"
	"github.com/hookline/hookline/relay"
	"github.com/hookline/hookline/relay/redisstore"
)

// serveOptions are the parsed flags of `hookline serve`.
type serveOptions struct {
	addr      string
	verbose   bool
	redisURL  string             // --redis-url: relay.Store is Redis's
	redisAcks redisstore.Options // --redis-min-replicas, --redis-ack-timeout
	canary    time.Duration      // --canary: how often (0: none)
	relay     relay.Options
}

func serveCommand(s *streams) *ucli.Command {
	var o serveOptions
	var f serveFlags
	return &ucli.Command{
		Name:      "serve",
		Usage:     "run a webhook relay that smee-client and hookline forward can subscribe to",
		UsageText: "hookline serve [--addr 127.0.0.1:3333] [--public-url URL] [--data-dir DIR | --redis-url URL] [options]",
		Description: "Runs a smee.io-compatible relay: GET /new makes a channel, POST /<channel> relays a\n" +
			"delivery to every subscriber of GET /<channel> (Server-Sent Events), and a browser on\n" +
			"the channel URL shows its deliveries live. Each channel keeps a history, so clients\n" +
			"that reconnect with Last-Event-ID lose nothing. With --data-dir the history is kept in\n" +
			"DIR/relay.db and survives a restart with the same event ids; each POST is answered\n" +
			"only once its delivery is on disk. With --redis-url the history is kept in Redis and\n" +
			"shared: run several relays on one Redis behind one URL (see docs/DEPLOY.md); a\n" +
			"delivery POSTed to one reaches the subscribers of all, and a client may resume on any.\n" +
			"Stop it with Ctrl-C: streams end, deliveries in flight finish.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{
				Name:        "addr",
				Destination: &o.addr,
				Value:       "127.0.0.1:3333",
				Usage:       "`host:port` to listen on (0.0.0.0:3333 for every interface)",
				EnvVars:     []string{"HOOKLINE_ADDR"},
			},
			&ucli.StringFlag{
				Name:        "public-url",
				Destination: &f.publicURL,
				Usage:       "`URL` clients reach the relay at, used in channel URLs (default: from each request's Host and X-Forwarded-* headers)",
				EnvVars:     []string{"HOOKLINE_PUBLIC_URL"},
			},
			&ucli.DurationFlag{
				Name:        "ping-interval",
				Destination: &o.relay.PingInterval,
				Value:       relay.DefaultPingInterval,
				Usage:       "`duration` of silence after which a stream gets a ping event",
				EnvVars:     []string{"HOOKLINE_PING_INTERVAL"},
			},
			&ucli.IntFlag{
				Name:        "history",
				Destination: &o.relay.HistoryCount,
				Value:       relay.DefaultHistoryCount,
				Usage:       "number (`n`) of deliveries each channel keeps at most for subscribers that reconnect (0: no count limit, --history-bytes bounds it)",
				EnvVars:     []string{"HOOKLINE_HISTORY"},
			},
			&ucli.StringFlag{
				Name:        "history-bytes",
				Destination: &f.historyBytes,
				Value:       "50MiB",
				Usage:       "`size` of the deliveries each channel keeps",
				EnvVars:     []string{"HOOKLINE_HISTORY_BYTES"},
			},
			&ucli.StringFlag{
				Name:        "total-history-bytes",
				Destination: &f.totalHistoryBytes,
				Value:       "256MiB",
				Usage:       "`size` of the deliveries all channels keep together",
				EnvVars:     []string{"HOOKLINE_TOTAL_HISTORY_BYTES"},
			},
			&ucli.DurationFlag{
				Name:        "history-age",
				Destination: &o.relay.HistoryAge,
				Usage:       "`duration` after which a channel drops a delivery when it receives the next one (0s: no age limit)",
				EnvVars:     []string{"HOOKLINE_HISTORY_AGE"},
			},
			&ucli.DurationFlag{
				Name:        "canary",
				Destination: &o.canary,
				Usage:       "every `duration`, time a delivery POSTed to a channel of the relay's own until it arrives on that channel's stream (/healthz \"canary\", /metrics; 0s: off)",
				EnvVars:     []string{"HOOKLINE_CANARY"},
			},
			&ucli.BoolFlag{
				Name:        "metrics-per-channel",
				Destination: &o.relay.CountPerChannel,
				Usage:       "count deliveries per channel in /metrics and /healthz, keyed by a hash of the name (a series per channel, at most --metrics-max-channels)",
			},
			&ucli.IntFlag{
				Name:        "metrics-max-channels",
				Destination: &o.relay.MaxChannelSeries,
				Value:       relay.DefaultMaxChannelSeries,
				Usage:       "with --metrics-per-channel, the number (`n`) of channels counted apart; the rest are counted under channel=\"other\"",
				EnvVars:     []string{"HOOKLINE_METRICS_MAX_CHANNELS"},
			},
			&ucli.StringFlag{
				Name:        "data-dir",
				Destination: &o.relay.DataDir,
				Usage:       "`directory` where channel history is kept across restarts (relay.db; created if missing; default: memory only)",
				EnvVars:     []string{"HOOKLINE_DATA_DIR"},
			},
			&ucli.StringFlag{
				Name:        "redis-url",
				Destination: &f.redisURL,
				Usage:       "`URL` of a Redis (7.0+) that keeps the history, shared by every relay using it: redis://[user:password@]host:port[/db], rediss:// for TLS; a primary Redis Sentinel watches: redis://[user:password@]sentinel:port?master_name=NAME&addr=sentinel2:port; a Redis Cluster: any node's address, or redis://[user:password@]node:port?addr=node2:port (default: no Redis)",
				EnvVars:     []string{"HOOKLINE_REDIS_URL"},
			},
			&ucli.IntFlag{
				Name:        "redis-min-replicas",
				Destination: &f.minReplicas,
				Usage:       "with --redis-url, answer a POST 2xx only once `N` of the Redis primary's replicas have its delivery (WAIT; in a Cluster, the replicas of the channel's shard); 0: do not wait (default: 1 when the primary has a replica, when every primary has one in a Cluster)",
			},
			&ucli.DurationFlag{
				Name:        "redis-ack-timeout",
				Destination: &f.ackTimeout,
				Value:       redisstore.DefaultAckTimeout,
				Usage:       "with --redis-min-replicas, how long a POST waits for the replicas before it is answered 503 (the sender retries)",
			},
			&ucli.StringFlag{
				Name:        "max-upload-bytes",
				Destination: &f.maxUploadBytes,
				Value:       "256MiB",
				Usage:       "`size` of the POST bodies received at once; beyond it, POSTs get 503 and Retry-After",
				EnvVars:     []string{"HOOKLINE_MAX_UPLOAD_BYTES"},
			},
			&ucli.IntFlag{
				Name:        "max-subscribers",
				Destination: &o.relay.MaxSubscribers,
				Value:       relay.DefaultMaxSubscribers,
				Usage:       "number (`n`) of streams one channel holds at once; one more cuts off the oldest, which resumes with Last-Event-ID",
				EnvVars:     []string{"HOOKLINE_MAX_SUBSCRIBERS"},
			},
			&ucli.IntFlag{
				Name:        "max-subscribers-per-ip",
				Destination: &o.relay.MaxSubscribersPerIP,
				Value:       relay.DefaultMaxSubscribersIP,
				Usage:       "number (`n`) of streams one client address holds on one channel; one more cuts off its oldest there",
				EnvVars:     []string{"HOOKLINE_MAX_SUBSCRIBERS_PER_IP"},
			},
			&ucli.IntFlag{
				Name:        "max-streams",
				Destination: &o.relay.MaxStreams,
				Usage:       "number (`n`) of streams the relay holds; beyond it, streams get 503 (default: three quarters of the open-file limit)",
				EnvVars:     []string{"HOOKLINE_MAX_STREAMS"},
			},
			&ucli.IntFlag{
				Name:        "max-streams-per-ip",
				Destination: &o.relay.MaxStreamsPerIP,
				Value:       relay.DefaultMaxStreamsPerIP,
				Usage:       "number (`n`) of streams one client address holds on all channels; beyond it, its streams get 503",
				EnvVars:     []string{"HOOKLINE_MAX_STREAMS_PER_IP"},
			},
			&ucli.IntFlag{
				Name:        "redeliveries-per-minute",
				Destination: &o.relay.RedeliveriesPerMinute,
				Value:       relay.DefaultRedeliveryRate,
				Usage:       "number (`n`) of redeliveries a minute each channel, and each client address, may ask for (bursts of ten); beyond it, 429",
				EnvVars:     []string{"HOOKLINE_REDELIVERIES_PER_MINUTE"},
			},
			&ucli.BoolFlag{
				Name:        "private-only",
				Destination: &o.relay.PrivateOnly,
				Usage:       "every channel is private: GET /new gives a read token with each, and a channel without one does not exist",
				EnvVars:     []string{"HOOKLINE_PRIVATE_ONLY"},
			},
			&ucli.IntFlag{
				Name:        "max-private-channels",
				Destination: &o.relay.MaxPrivateChannels,
				Value:       relay.DefaultMaxPrivateChannels,
				Usage:       "number (`n`) of private channels the relay keeps (a client network makes at most 10 a minute and holds a hundredth; when full, the oldest never used makes room)",
				EnvVars:     []string{"HOOKLINE_MAX_PRIVATE_CHANNELS"},
			},
			&ucli.DurationFlag{
				Name:        "private-channel-ttl",
				Destination: &o.relay.PrivateChannelTTL,
				Value:       relay.DefaultPrivateChannelTTL,
				Usage:       "`duration` a private channel may go unused (no delivery, no reader) before the relay removes it",
				EnvVars:     []string{"HOOKLINE_PRIVATE_CHANNEL_TTL"},
			},
			&ucli.StringFlag{
				Name:        "channel-secrets",
				Destination: &f.channelSecrets,
				Usage:       "`directory` of webhook secrets, one file per channel named as the channel: a POST to one is kept only if signed with its secret (401 otherwise); a CHANNEL.verify-token file holds the hub.verify_token the relay answers a hub's handshake with",
				EnvVars:     []string{"HOOKLINE_CHANNEL_SECRETS"},
			},
			&ucli.StringSliceFlag{
				Name:        "trusted-proxy",
				Destination: &f.trustedProxies,
				Usage:       "`address` or CIDR of a reverse proxy in front of the relay, whose X-Forwarded-For names the client that per-client limits count (repeatable)",
				EnvVars:     []string{"HOOKLINE_TRUSTED_PROXY"},
			},
			&ucli.BoolFlag{
				Name:        "verbose",
				Destination: &o.verbose,
				Aliases:     []string{"v"},
				Usage:       "also log every delivery (channel, id, size, subscribers, event) and Redis's own messages",
			},
		},
		OnUsageError: func(_ *ucli.Context, err error, _ bool) error {
			return usageErrorf("%v; run 'hookline serve --help' for usage", err)
		},
		Action: func(c *ucli.Context) error {
			opts, err := parseServe(c, o, &f)
			if err != nil {
				return err
			}
			return runServe(c.Context, opts, s)
		},
	}
}

// serveFlags are what serve's flags hold that are not options yet.
type serveFlags struct {
	publicURL, redisURL, channelSecrets             string
	historyBytes, totalHistoryBytes, maxUploadBytes string
	trustedProxies                                  ucli.StringSlice
	minReplicas                                     int
	ackTimeout                                      time.Duration
}

// parseServe checks the flags of `hookline serve`.
func parseServe(c *ucli.Context, opts serveOptions, f *serveFlags) (serveOptions, error) {
	if c.NArg() > 0 {
		return serveOptions{}, usageErrorf("serve takes no arguments, got %q; run 'hookline serve --help' for usage", c.Args().First())
	}
	if err := checkListenAddr(opts.addr); err != nil {
		return serveOptions{}, err
	}
	publicURL, err := checkPublicURL(f.publicURL)
	if err != nil {
		return serveOptions{}, err
	}
	opts.relay.PublicURL = publicURL
	if c.IsSet("data-dir") && strings.TrimSpace(opts.relay.DataDir) == "" {
		return serveOptions{}, usageErrorf("--data-dir is empty; give a directory, or leave the flag out to keep the history in memory")
	}
	if c.IsSet("redis-url") {
		u, err := checkRedisURL(f.redisURL)
		if err != nil {
			return serveOptions{}, err
		}
		if opts.relay.DataDir != "" {
			return serveOptions{}, usageErrorf("--redis-url and --data-dir cannot be used together: with Redis the history is kept in Redis, shared by every relay; drop --data-dir")
		}
		opts.redisURL = u
		ro := redisstore.Options{AckTimeout: f.ackTimeout}
		switch {
		case !c.IsSet("redis-min-replicas"):
		case f.minReplicas < 0:
			return serveOptions{}, usageErrorf("--redis-min-replicas %d: give 0 (do not wait) or more", f.minReplicas)
		case f.minReplicas == 0:
			ro.MinReplicas = redisstore.NoReplicas
		default:
			ro.MinReplicas = f.minReplicas
		}
		if f.ackTimeout <= 0 {
			return serveOptions{}, usageErrorf("--redis-ack-timeout %s: must be positive", f.ackTimeout)
		}
		opts.relay.Store, opts.redisAcks = redisstore.Opener(u, ro), ro
	}
	if (c.IsSet("redis-min-replicas") || c.IsSet("redis-ack-timeout")) && opts.redisURL == "" {
		return serveOptions{}, usageErrorf("--redis-min-replicas and --redis-ack-timeout go with --redis-url")
	}
	if opts.canary < 0 {
		return serveOptions{}, usageErrorf("--canary %s must not be negative (0s: no canary)", opts.canary)
	}
	if opts.relay.HistoryAge < 0 {
		return serveOptions{}, usageErrorf("--history-age %s must not be negative (0 means no age limit)", opts.relay.HistoryAge)
	}
	if opts.relay.PingInterval <= 0 {
		return serveOptions{}, usageErrorf("--ping-interval %s must be positive, such as 30s", opts.relay.PingInterval)
	}
	if opts.relay.HistoryCount < 0 {
		return serveOptions{}, usageErrorf("--history %d must not be negative (0: no count limit)", opts.relay.HistoryCount)
	}
	for _, f := range []struct {
		name string
		n    int
		min  int
	}{
		{"max-subscribers", opts.relay.MaxSubscribers, 1},
		{"max-subscribers-per-ip", opts.relay.MaxSubscribersPerIP, 1},
		{"max-streams", opts.relay.MaxStreams, 0},
		{"max-streams-per-ip", opts.relay.MaxStreamsPerIP, 1},
		{"redeliveries-per-minute", opts.relay.RedeliveriesPerMinute, 1},
	} {
		if f.n < f.min {
			return serveOptions{}, usageErrorf("--%s %d must be at least %d", f.name, f.n, max(f.min, 1))
		}
	}
	if opts.relay.MaxPrivateChannels < 1 {
		return serveOptions{}, usageErrorf("--max-private-channels %d must be at least 1", opts.relay.MaxPrivateChannels)
	}
	if f.channelSecrets != "" {
		if opts.relay.ChannelSecrets, opts.relay.ChannelVerifyTokens, err = readChannelSecrets(f.channelSecrets); err != nil {
			return serveOptions{}, err
		}
	}
	for _, v := range splitNames(f.trustedProxies.Value()) { // also HOOKLINE_TRUSTED_PROXY=a,b
		p, err := parsePrefix(v)
		if err != nil {
			return serveOptions{}, usageErrorf("--trusted-proxy %q is not an address or CIDR, such as 10.0.0.0/8 or 127.0.0.1", v)
		}
		opts.relay.TrustedProxies = append(opts.relay.TrustedProxies, p)
	}
	for _, b := range []struct {
		name, value string
		dst         *int64
	}{
		{"history-bytes", f.historyBytes, &opts.relay.HistoryBytes},
		{"total-history-bytes", f.totalHistoryBytes, &opts.relay.TotalHistoryBytes},
		{"max-upload-bytes", f.maxUploadBytes, &opts.relay.MaxUploadBytes},
	} {
		n, err := bytesize.Parse(b.value)
		if err != nil {
			return serveOptions{}, usageErrorf("--%s: %v", b.name, err)
		}
		*b.dst = n
	}
	return opts, nil
}

// parsePrefix reads a CIDR, or an address as the prefix of that address
// alone.
func parsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") { // [2001:db8::1], as in URLs
		s = s[1 : len(s)-1]
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	return p.Masked(), err
}

// checkListenAddr checks a --addr value, with a hint for the usual slips.
func checkListenAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		if _, perr := strconv.Atoi(strings.TrimPrefix(addr, ":")); perr == nil {
			return usageErrorf("--addr %q has no host; did you mean 127.0.0.1:%s?", addr, strings.TrimPrefix(addr, ":"))
		}
		return usageErrorf("--addr %q is not host:port; did you mean %s:3333?", addr, addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return usageErrorf("--addr %q has no valid port (0 to 65535)", addr)
	}
	return nil
}

// checkPublicURL checks a --public-url value and returns it without a
// trailing slash.
func checkPublicURL(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", usageErrorf("--public-url %q is not a URL: %v", s, err)
	case u.Scheme == "" || u.Host == "" && !strings.Contains(s, "://"):
		return "", usageErrorf("--public-url %q has no scheme; did you mean https://%s?", s, s)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", usageErrorf("--public-url %q must be an http or https URL", s)
	case u.Host == "":
		return "", usageErrorf("--public-url %q has no host", s)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return "", usageErrorf("--public-url %q must not have a user, query or fragment", s)
	}
	return strings.TrimRight(s, "/"), nil
}

// checkRedisURL checks a --redis-url value (without connecting).
func checkRedisURL(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", usageErrorf("--redis-url is empty; give a URL such as redis://127.0.0.1:6379, or leave the flag out")
	}
	if !strings.Contains(s, "://") {
		hidden := s
		if i := strings.LastIndex(s, "@"); i >= 0 {
			hidden = "xxxxx@" + s[i+1:] // a password, perhaps
		}
		return "", usageErrorf("--redis-url %q has no scheme; did you mean redis://%s?", hidden, hidden)
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", usageErrorf("--redis-url is not a URL (%v); write it as redis://[user:password@]host:port[/db]", strings.ReplaceAll(err.Error(), s, httpx.RedactURL(s)))
	case u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "unix":
		return "", usageErrorf("--redis-url %q must be a redis://, rediss:// (TLS) or unix:// URL", u.Redacted())
	case u.Scheme != "unix" && u.Host == "":
		return "", usageErrorf("--redis-url %q has no host", u.Redacted())
	}
	return s, nil
}

// redisError explains why relay.Open could not use --redis-url.
func redisError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "relay: ")
	if errors.Is(err, relay.ErrStoreUnavailable) {
		return fmt.Errorf("--redis-url: %s; start Redis or check the URL (host, port, password, TLS with rediss://)", msg)
	}
	return fmt.Errorf("--redis-url: %s", msg)
}

// dataDirError explains why relay.Open could not use --data-dir dir.
func dataDirError(dir string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "relay: ")
	switch {
	case errors.Is(err, relay.ErrDataDirInUse):
		return fmt.Errorf("--data-dir %q is in use: another hookline serve holds the lock on its %s; stop that one, or give this one another directory", dir, relay.DataFile)
	case errors.Is(err, relay.ErrDataDirDamaged):
		return fmt.Errorf("--data-dir %q: %s; move %s away to start with an empty history", dir, msg, relay.DataFile)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("--data-dir %q is not usable: %s; give the user running hookline read and write access, or choose another directory", dir, msg)
	}
	return fmt.Errorf("--data-dir %q is not usable: %s", dir, msg)
}

// runServe runs the relay until ctx ends (SIGINT, SIGTERM), then shuts it
// down gracefully.
func runServe(ctx context.Context, opts serveOptions, s *streams) error {
	// A line per delivery is for --verbose (debug): on a busy relay it
	// costs a write per delivery, and forward's trace shows them anyway.
	level := slog.LevelInfo
	if opts.verbose {
		level = slog.LevelDebug
	}
	opts.relay.Logger = slog.New(slog.NewTextHandler(s.err, &slog.HandlerOptions{Level: level}))
	if opts.redisURL != "" {
		// go-redis logs to stderr process-wide; every failure it reports
		// also reaches the relay as an error, which the relay logs and
		// answers, so its own lines go to the relay's log at debug level.
		redisstore.SetLogger(opts.relay.Logger)
	}
	reg := metrics.NewRegistry()
	opts.relay.Metrics = reg.Handler()
	var can *canary.Canary
	if opts.canary > 0 {
		can = &canary.Canary{Channel: canary.ChannelName()}
		opts.relay.Canary, opts.relay.CanaryChannel = can.Stats, can.Channel
	}
	opts.relay.ObserveWrite = reg.HistoryWrites()
	srv, err := relay.New(opts.relay)
	if err == nil {
		reg.Relay(srv.Stats)
	}
	if err != nil {
		if opts.redisURL != "" {
			return redisError(err)
		}
		return dataDirError(opts.relay.DataDir, err)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		// The garbage collector works harder near the bound rather than
		// let the heap double past it (GOGC), so resident memory stays
		// close to what the limits allow; 64 MiB for the rest.
		debug.SetMemoryLimit(srv.MemoryBound() + 64<<20)
	}
	ln, err := net.Listen("tcp", opts.addr)
	if err != nil {
		srv.CloseStorage()
		return fmt.Errorf("cannot listen on %s: %w; is something else using it? pick another --addr", opts.addr, err)
	}
	listen := relay.ListenURL(ln.Addr())
	base := listen
	if opts.relay.PublicURL != "" {
		base = opts.relay.PublicURL
	}
	bold := paint(s.outColor, color.Bold)
	fmt.Fprintf(s.out, "hookline relay listening on %s\n", listen)
	if base != listen {
		fmt.Fprintf(s.out, "public URL:  %s\n", base)
	}
	switch {
	case opts.relay.DataDir != "":
		st := srv.Stats()
		fmt.Fprintf(s.out, "history:     %s (%s in %s restored)\n", filepath.Join(opts.relay.DataDir, relay.DataFile), plural(st.Retained, "delivery", "deliveries"), plural(st.Channels, "channel", "channels"))
	case opts.redisURL != "":
		st := srv.Stats()
		fmt.Fprintf(s.out, "history:     %s at %s, shared with every relay using it (%s in %s)\n", st.Store, httpx.RedactURL(opts.redisURL), plural(st.Retained, "delivery", "deliveries"), plural(st.Channels, "channel", "channels"))
		switch replicas := plural(st.Replicas, "replica", "replicas"); {
		case st.AckReplicas > 0:
			fmt.Fprintf(s.out, "acks:        a POST is answered once %d of the replicas of its channel's Redis primary (%d connected) %s its delivery (up to %s, then 503; --redis-min-replicas)\n",
				st.AckReplicas, st.Replicas, map[bool]string{true: "has", false: "have"}[st.AckReplicas == 1], opts.redisAcks.AckTimeout)
		case st.Replicas > 0:
			fmt.Fprintf(s.out, "acks:        not replicated (--redis-min-replicas 0): a delivery the primary has not yet copied to its %s is lost if it fails\n", replicas)
		default:
			fmt.Fprintf(s.out, "acks:        not replicated: the Redis primary has no replica, so losing it loses the history (docs/DEPLOY.md)\n")
		}
	default:
		fmt.Fprintf(s.out, "history:     in memory (lost on restart; --data-dir keeps it)\n")
	}
	fmt.Fprintf(s.out, "new channel: %s\n", bold.Sprint(base+"/"+srv.NewChannel()))
	fmt.Fprintf(s.out, "(open a channel URL in a browser to watch its deliveries; GET %s/new makes another; Ctrl-C stops)\n", base)

	start := time.Now()
	if can != nil {
		canaryCtx, stopCanary := context.WithCancel(ctx)
		defer stopCanary()
		go can.Run(canaryCtx, listen, opts.canary, opts.relay.Logger)
	}
	err = srv.Serve(ctx, ln)
	st := srv.Stats()
	fmt.Fprintf(s.out, "hookline relay stopped after %s: %d deliveries relayed\n", time.Since(start).Round(time.Second), st.Deliveries)
	return err
}

// readChannelSecrets reads serve --channel-secrets: one file per channel,
// named as the channel, holding its webhook secret (as a Kubernetes Secret
// mounted as a volume lays out its keys), and CHANNEL.verify-token files
// holding the hub.verify_token with which the relay answers a hub's
// handshake on the channel. Dot files are skipped (a mounted Secret's
// ..data); any other name that is not a channel's is an error, as is an
// empty file: a typo must not leave a channel unprotected silently.
func readChannelSecrets(dir string) (secrets, verifyTokens map[string]string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, usageErrorf("--channel-secrets: %v", err)
	}
	secrets, verifyTokens = map[string]string{}, map[string]string{}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		channel, isToken := strings.CutSuffix(name, ".verify-token")
		what, m := "webhook secret", secrets
		if isToken {
			what, m = "hub.verify_token", verifyTokens
		}
		if err := relay.ValidChannelName(channel); err != nil {
			return nil, nil, usageErrorf("--channel-secrets: %s: a file here is named as the channel it binds, or CHANNEL.verify-token (%v)", filepath.Join(dir, name), err)
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, nil, usageErrorf("--channel-secrets: %v", err)
		}
		value := strings.TrimSpace(string(b))
		if value == "" {
			return nil, nil, usageErrorf("--channel-secrets: %s is empty: it must hold the channel's %s", filepath.Join(dir, name), what)
		}
		m[channel] = value
	}
	return secrets, verifyTokens, nil
}
