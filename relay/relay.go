package relay

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookline/hookline/internal/httpx"
	"github.com/hookline/hookline/internal/loglimit"
	"github.com/hookline/hookline/internal/wire"
	"github.com/hookline/hookline/webhooks/provider"
)

// Defaults for the zero values of Options.
const (
	DefaultPingInterval      = 30 * time.Second
	DefaultHistoryCount      = 0 // no count limit: HistoryBytes bounds a channel's history
	DefaultHistoryBytes      = 50 << 20
	DefaultTotalHistoryBytes = 256 << 20
	DefaultMaxSubscribers    = 100
	DefaultMaxSubscribersIP  = 10
	DefaultMaxStreamsPerIP   = 100
	DefaultRedeliveryRate    = 30
	DefaultMaxBodyBytes      = 25 << 20
	DefaultMaxUploadBytes    = 256 << 20
	DefaultSubscriberQueue   = 1024
	DefaultWriteTimeout      = 30 * time.Second
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 2 * time.Minute
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultShutdownTimeout   = 10 * time.Second
)

// MaxChannelNameLength is the longest channel name the relay accepts (as
// smee.io: 1 to 128 characters of A-Z a-z 0-9 - _).
const MaxChannelNameLength = 128

// GuessableNameLength: a channel name shorter than this ("test", "dev") is
// accepted, but the relay's log and the channel's page warn that it can be
// guessed (the name is the only key). NewChannel's names have 22
// characters (128 random bits).
const GuessableNameLength = 16

// Options configure a Server. The zero value is ready to use: every zero
// (or negative) field takes its Default.
type Options struct {
	// PublicURL is the base URL clients reach the relay at, such as
	// "https://relay.example.com", used for the Location of GET /new and by
	// URL. A trailing slash is ignored; a path is kept in the URLs the relay
	// builds (a reverse proxy in front must strip it). If empty, GET /new
	// builds the URL from the request: the scheme from X-Forwarded-Proto
	// (http or https) or the connection, the host from X-Forwarded-Host or
	// Host. That is safe, as the URL goes back only to the client that sent
	// those headers, but set PublicURL behind a proxy you do not control.
	PublicURL string

	// PingInterval is how often an idle stream gets a ping event.
	// If zero, DefaultPingInterval (30 s, as smee.io).
	PingInterval time.Duration

	// HistoryCount and HistoryBytes bound the deliveries each channel keeps
	// for replay after Last-Event-ID; the newest delivery is kept even when
	// it alone is larger than HistoryBytes. If zero, DefaultHistoryCount
	// (no count limit) and DefaultHistoryBytes (50 MiB). The history is
	// bounded by bytes, not by a count: a subscriber cut off for falling
	// SubscriberQueue deliveries behind in a burst resumes from it, and a
	// burst is lost only beyond what memory (or the file) was given to
	// hold. (The default was 100 deliveries once, which a burst of 400 KiB
	// overflowed.)
	HistoryCount int
	HistoryBytes int64

	// TotalHistoryBytes bounds the history of all channels together: above
	// it, the channels that received a delivery least recently lose their
	// oldest deliveries first. If zero, DefaultTotalHistoryBytes.
	//
	// A delivery counts all the memory it holds: its body, query and
	// headers, the parts of its events around the body, and a fixed
	// overhead. Deliveries that streams still hold once the history has
	// dropped them (queued for a stream that reads slowly, or being
	// written) count too, separately (Stats.PinnedBytes): beyond
	// TotalHistoryBytes of them, the streams holding the most are cut off
	// (they resume with Last-Event-ID). So the relay's live memory stays
	// within twice TotalHistoryBytes plus the uploads in flight (see
	// docs/DEPLOY.md for the measured figures). With DataDir the limits
	// bound the file too (plus bbolt's page overhead): the history is in
	// memory and in the file; with a shared Store (Redis) they bound the
	// history there, and the relay keeps none.
	TotalHistoryBytes int64

	// HistoryAge, if positive, bounds the age of each channel's history:
	// when a channel receives a delivery, those it received more than
	// HistoryAge before it are dropped (a channel that receives nothing
	// keeps what it has, within the other limits). If zero, no age limit.
	HistoryAge time.Duration

	// MaxSubscribers is the number of streams one channel holds at once;
	// one more cuts off the oldest (which resumes with Last-Event-ID), so
	// that strangers holding a channel's streams cannot lock its owner
	// out. If zero, DefaultMaxSubscribers.
	MaxSubscribers int

	// MaxSubscribersPerIP is the number of streams one client address
	// (see TrustedProxies) holds on one channel; one more cuts off its
	// oldest there, which a client that reconnected after a network change
	// no longer reads anyway. A stranger who knows a channel's name thus
	// cannot fill it from one address. If zero, DefaultMaxSubscribersIP.
	MaxSubscribersPerIP int

	// MaxStreams bounds the streams of the whole relay, and MaxStreamsPerIP
	// those of one client address: beyond them, a stream is refused with
	// 503 and Retry-After. Each stream holds a file descriptor; the
	// default MaxStreams is three quarters of the process's limit on open
	// files (RLIMIT_NOFILE; 10,000 where there is none), so that POSTs
	// always find one. If zero, that default and DefaultMaxStreamsPerIP.
	MaxStreams      int
	MaxStreamsPerIP int

	// MaxConns bounds the connections Serve holds, streams included, and
	// MaxConnsPerIP those of one peer address (a trusted proxy's are not
	// counted by address): a connection beyond either is closed at once,
	// before a byte is read, so that idle connections from one address
	// cannot take every file descriptor (a POST from elsewhere still finds
	// one). If zero, MaxStreams plus a sixth of the open-file limit (room
	// for POSTs; the rest stays for storage and the process), and twice
	// MaxStreamsPerIP.
	MaxConns      int
	MaxConnsPerIP int

	// RedeliveriesPerMinute bounds POST /<channel>/redeliver/<id>, for each
	// channel and for each client address, with bursts of up to ten:
	// beyond it, 429 with Retry-After. A redelivery is cheap to ask for and
	// costs a whole delivery to store and send. If zero,
	// DefaultRedeliveryRate.
	RedeliveriesPerMinute int

	// TrustedProxies are the addresses of reverse proxies in front of the
	// relay: for a connection from one of them, the client address that
	// per-client limits count is taken from X-Forwarded-For (the rightmost
	// address that is not a trusted proxy). Without them, it is the
	// connection's peer. An IPv6 client counts as its /64.
	TrustedProxies []netip.Prefix

	// MaxBodyBytes is the largest body a POST may carry; a larger one gets
	// 413. If zero, DefaultMaxBodyBytes (25 MiB, GitHub's limit).
	MaxBodyBytes int64

	// MaxUploadBytes bounds the POST bodies being received at once, each
	// counted by the buffer it has grown to hold what arrived (at most
	// twice that, never its announced Content-Length): beyond it, a POST
	// gets 503 with Retry-After, so that a flood of large uploads cannot
	// exhaust memory, while uploads that announce much and send nothing
	// hold next to nothing. One client address holds at most a quarter of
	// it (or one MaxBodyBytes, if more), and an upload whose bytes stop
	// coming for 10 s, or arrive slower than 16 KiB/s on average after the
	// first 10 s, is cut (408). Bodies of at most 1 MiB (nearly every
	// webhook) may use an eighth more, so that they still get through
	// while large uploads fill the budget. One upload is always admitted,
	// whatever its size. If zero, DefaultMaxUploadBytes.
	MaxUploadBytes int64

	// SubscriberQueue is how many deliveries may wait for one subscriber;
	// at most HistoryBytes of them may wait, too. A subscriber that falls
	// further behind is cut off: its stream ends and it resumes from the
	// history with Last-Event-ID. Waiting deliveries are shared with the
	// history, not copied, and an idle subscriber holds no queue.
	// If zero, DefaultSubscriberQueue.
	SubscriberQueue int

	// WriteTimeout is how long one event may take to write to a subscriber
	// (plus one second per MiB of the event); a subscriber that does not
	// read is cut off after it. If zero, DefaultWriteTimeout.
	WriteTimeout time.Duration

	// ReadHeaderTimeout, ReadTimeout and IdleTimeout configure the
	// http.Server of Serve (streams are exempt from ReadTimeout). If zero,
	// their Defaults. ServeHTTP does not use them.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	IdleTimeout       time.Duration

	// ShutdownTimeout is how long Serve waits for in-flight requests after
	// its context ends. If zero, DefaultShutdownTimeout.
	ShutdownTimeout time.Duration

	// PrivateOnly makes every channel private (see access.go): GET /new
	// makes private channels only, and a channel without a read token
	// does not exist (404 to its streams, page and POSTs).
	PrivateOnly bool

	// MaxPrivateChannels bounds the private channels the store keeps. GET
	// /new?private=1 is limited to 10 a minute per client network (an
	// IPv4 address, an IPv6 /48) and 120 a minute for the relay; a network
	// holds at most a hundredth of MaxPrivateChannels (10 at least); when
	// the relay holds MaxPrivateChannels, the oldest channel never used
	// makes room for a new one. If zero, DefaultMaxPrivateChannels.
	MaxPrivateChannels int

	// PrivateChannelTTL is how long a private channel may go unused (no
	// delivery received, no reader) before it is removed from the store,
	// its name unknown from then on (404). A channel with a stream open
	// is in use. If zero, DefaultPrivateChannelTTL.
	PrivateChannelTTL time.Duration

	// ChannelSecrets binds channels (private or not) to webhook secrets:
	// a POST to one is stored only if its signature verifies with the
	// secret, and answered 401 otherwise (hookline serve
	// --channel-secrets reads them from a directory). It takes precedence
	// over a secret PUT to a private channel.
	ChannelSecrets map[string]string
	// ChannelVerifyTokens gives channels (private or not) the
	// hub.verify_token with which the relay answers a hub's handshake
	// (GET ?hub.mode=subscribe&hub.challenge=…: WebSub, Meta, Strava);
	// without one it answers none. It takes precedence over a token PUT to
	// a private channel's /verify-token.
	ChannelVerifyTokens map[string]string

	// Canary, if set, gives Stats.Canary (and /healthz its "canary"): what
	// a canary outside the relay measured (hookline serve --canary).
	Canary func() CanaryStats
	// CanaryChannel, if set, names the canary's channel: its deliveries
	// are counted in Stats.CanaryDeliveries, not in Stats.Deliveries
	// (nor per channel), so that the relay's counts are its users'.
	CanaryChannel string
	// CountPerChannel counts deliveries per channel (Stats.PerChannel, by
	// ChannelKey: a channel's name is its secret). Off by default: a relay
	// has as many channels as strangers make, each a time series to a
	// metrics system. At most MaxChannelSeries channels are counted apart.
	CountPerChannel bool
	// MaxChannelSeries bounds the channels CountPerChannel counts apart:
	// beyond it, the channel delivered to least recently (or a private
	// channel removed) has its count moved to the "other" key. If zero,
	// DefaultMaxChannelSeries.
	MaxChannelSeries int
	// ObserveWrite, if set, is told how long each durable write of the
	// history took (with DataDir: a bbolt transaction, synced to disk).
	ObserveWrite func(time.Duration)
	// Metrics, if set, is served at GET /metrics (hookline serve gives
	// its Prometheus handler; the relay itself imports no metrics library).
	Metrics http.Handler

	// Logger receives one record per subscriber and cut-off (info), and
	// one per delivery (debug). No record holds a request's URL or
	// headers, where a private channel's token may be.
	// If nil, nothing is logged.
	Logger *slog.Logger

	// DataDir, if not empty, keeps the history in the file DataDir/relay.db
	// (DataFile; the directory is created if needed), so that it survives
	// a restart with the same ids: every delivery is written and fsynced
	// before its POST is answered. New fails when the file is unusable:
	// locked by another relay (ErrDataDirInUse), damaged
	// (ErrDataDirDamaged), or not writable. If empty, the history is kept
	// in memory and lost when the process ends.
	DataDir string

	// Store, if not nil, opens the storage engine that keeps the history
	// instead of this package's (in memory, or in DataDir): New calls it
	// with the limits above. redisstore.Opener keeps it in Redis, shared by
	// every relay using the same Redis: they can run behind one URL as
	// replicas, a delivery POSTed to one reaches the subscribers of all,
	// and a client may resume (Last-Event-ID) on any of them. New fails
	// with its error (wrapping ErrStoreUnavailable when its server does
	// not answer). It excludes DataDir. Replicas sharing a store should run
	// with the same limits: each append applies those of the relay that
	// received it.
	Store OpenStore
}

// Server is a relay: an http.Handler serving the routes listed in the
// package documentation, and a server for them (Serve). Create it with New;
// it is safe for concurrent use.
type Server struct {
	opts    Options
	log     *slog.Logger
	started time.Time
	listen  atomic.Pointer[string] // base URL of the listener given to Serve

	store  Store
	shared SharedStore // store, when shared with other relays (Options.Store); else nil

	mu              sync.Mutex
	channels        map[string]*channel // channels in use (see channel)
	closed          bool
	streams         int            // open streams (see admit)
	streamsByIP     map[string]int // of them, by client address
	streamsByHolder map[string]int // of them, by holder (holderOf: IPv6 by /48)
	redeliver       *rateLimits    // of redeliveries, by channel and client address
	creations       *rateLimits    // of private channels, by client network
	expired         atomic.Int64   // UnixNano of the last expirePrivate
	closing         chan struct{}  // closed by Close
	hijacked        sync.WaitGroup // streams served on hijacked connections (see serveStream)
	// background is the work a shared store's feed starts (catchUpLater):
	// CloseStorage ends it (stopBackground, under mu, so none starts
	// after) and waits for it before it closes the store.
	background     sync.WaitGroup
	backgroundCtx  context.Context
	stopBackground context.CancelFunc

	subscribers      atomic.Int64
	deliveries       atomic.Int64
	canaryDeliveries atomic.Int64 // Options.CanaryChannel's
	cutOff           atomic.Int64
	counts           *channelCounts // with Options.CountPerChannel
	sent             atomic.Int64   // deliveries written to streams (Stats.Sent)
	// refused counts what each limit refused (Stats.Refused).
	refusedUploads, refusedStreams, refusedRedeliveries, refusedTooLarge atomic.Int64
	refusedUnauthorized, refusedUnsigned                                 atomic.Int64
	// pinned is the size of the deliveries that subscribers hold (queued,
	// being written, replayed) and no history in memory does: see shed.
	pinned       *atomic.Int64
	uploads      atomic.Int64     // bytes reserved by the POST bodies being read (see readBody)
	uploadMu     sync.Mutex       // guards uploadsByIP
	uploadsByIP  map[string]int64 // the share of uploads each client address holds
	refusedAt    atomic.Int64     // UnixNano of the last upload refused for the budget (/healthz: degraded)
	refusals     loglimit.Limit   // the log lines saying which upload limit refuses what
	conns        connCount        // what limitListener counts
	fetchMu      sync.Mutex
	fetches      map[string]*fetch            // bodies being written to fetches, by channel/id (see fetching)
	fetchBytes   int64                        // their size
	connRefusals loglimit.Limit               // the log lines about refused connections
	untrustedXFF atomic.Bool                  // X-Forwarded-For came from an untrusted peer, and the log said so
	shedding     sync.Mutex                   // one shed at a time
	writeErr     atomic.Pointer[writeFailure] // the last append's failure; nil after a success
}

// writeFailure is an append that failed, for /healthz: it reports it for
// writeFailureTTL, or until an append succeeds. It expires so that a relay
// taken out of a load balancer for it gets traffic (and the check) again.
type writeFailure struct {
	err error
	at  time.Time
}

const writeFailureTTL = time.Minute

// New returns a Server with opts (see Options for the defaults). With
// opts.DataDir it opens the history file there: its deliveries are loaded
// (and trimmed to the limits of opts) and channels continue from their last
// ids; the file stays locked until CloseStorage (which Serve calls). An
// unusable directory gives an error saying why, wrapping ErrDataDirInUse or
// ErrDataDirDamaged where they apply, or the file system's error (such as
// fs.ErrPermission).
//
// With opts.Store, New opens that storage engine and fails with its error
// (redisstore's connects to Redis and checks its version; a Redis that does
// not answer gives an error wrapping ErrStoreUnavailable). It stays open
// until CloseStorage. Once open, the relay survives the outages of a
// shared store's server: see docs/RELAY.md.
//
// With neither, the history is kept in memory and New fails only on
// options that contradict each other.
func New(opts Options) (*Server, error) {
	if opts.DataDir != "" && opts.Store != nil {
		return nil, errors.New("relay: Options.DataDir and Options.Store exclude each other: the history is kept in one store")
	}
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	defInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	opts.PublicURL = strings.TrimRight(opts.PublicURL, "/")
	defDur(&opts.PingInterval, DefaultPingInterval)
	defInt(&opts.HistoryCount, DefaultHistoryCount)
	def(&opts.HistoryBytes, DefaultHistoryBytes)
	def(&opts.TotalHistoryBytes, DefaultTotalHistoryBytes)
	defInt(&opts.MaxSubscribers, DefaultMaxSubscribers)
	defInt(&opts.MaxSubscribersPerIP, DefaultMaxSubscribersIP)
	defInt(&opts.MaxStreams, defaultMaxStreams())
	defInt(&opts.MaxStreamsPerIP, DefaultMaxStreamsPerIP)
	defInt(&opts.MaxConns, opts.MaxStreams+max(opts.MaxStreams/8, 64)) // ¾ + ⅛ of the open-file limit: ⅛ left
	defInt(&opts.MaxConnsPerIP, 2*opts.MaxStreamsPerIP)
	defInt(&opts.RedeliveriesPerMinute, DefaultRedeliveryRate)
	defInt(&opts.MaxPrivateChannels, DefaultMaxPrivateChannels)
	defDur(&opts.PrivateChannelTTL, DefaultPrivateChannelTTL)
	defInt(&opts.MaxChannelSeries, DefaultMaxChannelSeries)
	def(&opts.MaxBodyBytes, DefaultMaxBodyBytes)
	def(&opts.MaxUploadBytes, DefaultMaxUploadBytes)
	defInt(&opts.SubscriberQueue, DefaultSubscriberQueue)
	defDur(&opts.WriteTimeout, DefaultWriteTimeout)
	defDur(&opts.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	defDur(&opts.ReadTimeout, DefaultReadTimeout)
	defDur(&opts.IdleTimeout, DefaultIdleTimeout)
	defDur(&opts.ShutdownTimeout, DefaultShutdownTimeout)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lim := Limits{ChanCount: opts.HistoryCount, ChanBytes: opts.HistoryBytes, TotalBytes: opts.TotalHistoryBytes, Age: max(opts.HistoryAge, 0),
		PrivateChannels: opts.MaxPrivateChannels, PrivatePerNetwork: privateShare(opts.MaxPrivateChannels)}
	pinned := new(atomic.Int64)
	var st Store = newMemStore(lim, pinned)
	switch {
	case opts.DataDir != "":
		bs, err := openBolt(opts.DataDir, lim, pinned, log, opts.ObserveWrite)
		if err != nil {
			return nil, err
		}
		st = bs
	case opts.Store != nil:
		es, err := opts.Store(lim, log)
		if err != nil {
			return nil, err
		}
		st = es
	}
	shared, _ := st.(SharedStore)
	s := &Server{
		opts:            opts,
		log:             log,
		started:         time.Now(),
		store:           st,
		shared:          shared,
		channels:        map[string]*channel{},
		uploadsByIP:     map[string]int64{},
		refusals:        loglimit.Limit{Burst: 1, Window: 10 * time.Second},
		connRefusals:    loglimit.Limit{Burst: 1, Window: 10 * time.Second},
		streamsByIP:     map[string]int{},
		streamsByHolder: map[string]int{},
		fetches:         map[string]*fetch{},
		redeliver:       newRateLimits(opts.RedeliveriesPerMinute, redeliveryBurst),
		creations:       newRateLimits(privateChannelsPerMinute, privateChannelBurst),
		counts:          newChannelCounts(opts.MaxChannelSeries),
		closing:         make(chan struct{}),
		pinned:          pinned,
	}
	s.creations.all = perMinute(relayChannelsPerMinute, relayChannelBurst)
	s.backgroundCtx, s.stopBackground = context.WithCancel(context.Background())
	if shared != nil {
		shared.StartFeed(s.fromFeed)
	}
	return s, nil
}

// CloseStorage closes the history: the file of Options.DataDir is closed
// and unlocked (every delivery already answered with 200 is in it; nothing
// is pending), or Options.Store is closed (Redis: its connections). Call
// it once the http.Server that mounts the relay has shut down: later POSTs
// get 503, and so do streams that ask for a replay.
// Serve calls it when it returns. It is idempotent. For a history in
// memory it does nothing. The reads of a shared store that its feed
// started end first: none uses the store once it is closed.
func (s *Server) CloseStorage() error {
	s.mu.Lock()
	s.stopBackground()
	s.mu.Unlock()
	s.background.Wait()
	if !s.store.Persistent() {
		return nil
	}
	return s.store.Close()
}

// NewChannel returns a new random channel name: 22 characters of base64url
// holding 128 bits from crypto/rand, as GET /new hands out. Channels need no
// registration: the name is the capability, so keep it secret.
func (s *Server) NewChannel() string { return newChannelName() }

func newChannelName() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand.Read crashes the program instead)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// URL returns the relay's base URL without a trailing slash: Options.PublicURL
// when set, else the URL of the listener passed to Serve (with a loopback
// address for an unspecified one such as 0.0.0.0), else "" (before Serve).
// A channel's URL is URL() + "/" + name.
func (s *Server) URL() string {
	if s.opts.PublicURL != "" {
		return s.opts.PublicURL
	}
	if u := s.listen.Load(); u != nil {
		return *u
	}
	return ""
}

// sharedName names the server of a shared store ("" for none).
func sharedName(st SharedStore) string {
	if st == nil {
		return ""
	}
	return st.String()
}

// Stats is a snapshot of a Server's counters, as /healthz reports them.
type Stats struct {
	Channels         int    `json:"channels"`                   // channels with a subscriber (on this relay) or a retained delivery
	Subscribers      int    `json:"subscribers"`                // open streams (on this relay)
	Persistent       bool   `json:"persistent"`                 // the history outlives the process (Options.DataDir, or a persistent Options.Store)
	Shared           bool   `json:"shared"`                     // the history is in Redis, shared with other relays (a SharedStore)
	Store            string `json:"store,omitempty"`            // the shared store's server: "Redis", "Redis Sentinel (primary NAME)", "Redis Cluster"
	Deliveries       int64  `json:"deliveries"`                 // deliveries received since New (redeliveries included; by this relay), the canary's apart
	CanaryDeliveries int64  `json:"canaryDeliveries,omitempty"` // the canary's deliveries (Options.CanaryChannel)
	Sent             int64  `json:"sent"`                       // deliveries written to streams since New (one per subscriber; replays of the history included)
	Retained         int    `json:"retained"`                   // deliveries held in histories (restored ones, and other relays' in Redis, included)
	HistoryBytes     int64  `json:"historyBytes"`               // their counted size
	AckReplicas      int    `json:"ackReplicas,omitempty"`      // the replicas of the shared store's server each POST's append waits for
	Replicas         int    `json:"replicas,omitempty"`         // the replicas its primary had connected at the last look (in a Redis Cluster, the fewest any primary had)
	Unreplicated     int64  `json:"unreplicated,omitempty"`     // appends its primary took but too few replicas confirmed (answered 503)
	CutOff           int64  `json:"cutOff"`                     // slow subscribers cut off since New
	PinnedBytes      int64  `json:"pinnedBytes"`                // counted size of deliveries only streams hold (queued, being written), beyond the history
	UploadBytes      int64  `json:"uploadBytes"`                // bytes reserved by the POST bodies being received
	Connections      int64  `json:"connections"`                // connections Serve holds (streams included)
	FetchBytes       int64  `json:"fetchBytes"`                 // bodies being written to fetches of links
	ConnsRefused     int64  `json:"connsRefused"`               // connections closed at once since New, beyond MaxConns or MaxConnsPerIP
	// Refused counts, since New, what each other limit refused: uploads
	// (the upload budget, in total or per address), streams (MaxStreams,
	// per address or network), redeliveries (RedeliveriesPerMinute),
	// tooLarge (bodies over MaxBodyBytes), unauthorized and unsigned
	// (private channels, ChannelSecrets).
	Refused RefusedStats `json:"refused"`
	// Canary is the canary's last round trip (Options.Canary); nil without.
	Canary *CanaryStats `json:"canary,omitempty"`
	// PerChannel counts the deliveries each channel received since New,
	// by ChannelKey (Options.CountPerChannel; nil without), for at most
	// Options.MaxChannelSeries channels; the others' under "other".
	PerChannel map[string]int64 `json:"perChannel,omitempty"`
}

// ChannelKey names a channel where its name must not show (metrics,
// /healthz): "sha256:" and the first 12 hex digits of the SHA-256 of its
// name. Whoever knows a channel can compute its key; the key does not
// give the channel.
func ChannelKey(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "sha256:" + hex.EncodeToString(sum[:6])
}

// RefusedStats are Stats.Refused.
type RefusedStats struct {
	Uploads      int64 `json:"uploads"`
	Streams      int64 `json:"streams"`
	Redeliveries int64 `json:"redeliveries"`
	TooLarge     int64 `json:"tooLarge"`
	Unauthorized int64 `json:"unauthorized"` // reads of a private channel without its token, or with another
	Unsigned     int64 `json:"unsigned"`     // POSTs to a channel bound to a secret whose signature did not verify
}

// perChannelStats is Stats.PerChannel.
func (s *Server) perChannelStats() map[string]int64 {
	if !s.opts.CountPerChannel {
		return nil
	}
	return s.counts.stats()
}

// canaryStats is Stats.Canary.
func (s *Server) canaryStats() *CanaryStats {
	if s.opts.Canary == nil {
		return nil
	}
	st := s.opts.Canary()
	return &st
}

// Stats returns the current counters. With a shared Options.Store, the store's
// counters (Channels, Retained, HistoryBytes) take a round trip to its
// server, and are zero when it does not answer.
func (s *Server) Stats() Stats { return s.stats(context.Background(), true) }

// stats returns the counters, those of the store only if withStore.
func (s *Server) stats(ctx context.Context, withStore bool) Stats {
	var subscribed []string
	s.mu.Lock()
	for name, c := range s.channels {
		if c.nsubs.Load() > 0 {
			subscribed = append(subscribed, name)
		}
	}
	s.mu.Unlock()
	var st StoreStats
	if withStore {
		st = s.store.Stats(ctx)
	}
	channels := st.Channels
	if withStore {
		channels += s.store.Missing(ctx, subscribed) // one round trip with Redis
	} else {
		channels += len(subscribed)
	}
	inMemory := !s.store.Persistent()
	return Stats{
		Channels:         channels,
		Subscribers:      int(s.subscribers.Load()),
		Persistent:       !inMemory,
		Shared:           s.shared != nil,
		Store:            sharedName(s.shared),
		Deliveries:       s.deliveries.Load(),
		CanaryDeliveries: s.canaryDeliveries.Load(),
		Sent:             s.sent.Load(),
		Retained:         st.Retained,
		HistoryBytes:     st.Bytes,
		AckReplicas:      st.AckReplicas,
		Replicas:         st.Replicas,
		Unreplicated:     st.Unreplicated,
		CutOff:           s.cutOff.Load(),
		PinnedBytes:      s.pinned.Load(),
		UploadBytes:      s.uploads.Load(),
		Connections:      s.conns.n.Load(),
		FetchBytes:       s.fetchedBytes(),
		ConnsRefused:     s.conns.refused.Load(),
		Refused: RefusedStats{Uploads: s.refusedUploads.Load(), Streams: s.refusedStreams.Load(),
			Redeliveries: s.refusedRedeliveries.Load(), TooLarge: s.refusedTooLarge.Load(),
			Unauthorized: s.refusedUnauthorized.Load(), Unsigned: s.refusedUnsigned.Load()},
		Canary:     s.canaryStats(),
		PerChannel: s.perChannelStats(),
	}
}

// Close ends every stream (cleanly: the response ends, clients see EOF and
// reconnect elsewhere or later) and makes the relay refuse new streams with
// 503. POSTs still work, so in-flight deliveries are not lost. Close is
// idempotent; Serve calls it when its context ends.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.closing)
	}
}

// Serve serves the relay on ln until ctx ends, then shuts down gracefully:
// it stops accepting connections, ends every stream (Close), waits up to
// Options.ShutdownTimeout for in-flight requests, and closes ln. It returns
// nil after a clean shutdown, an error if requests were still running at
// the timeout (they are cut) or if serving failed. Call it once per Server.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	base := ListenURL(ln.Addr())
	s.listen.Store(&base)
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		ReadTimeout:       s.opts.ReadTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		// For responses other than streams, which manage their own
		// deadlines; a POST may take ReadTimeout to upload its body.
		WriteTimeout:   s.opts.ReadTimeout + s.opts.WriteTimeout,
		MaxHeaderBytes: 4 * maxHeaderBytes,
		// Accept errors (out of file descriptors), panics: an operator
		// must see them.
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	closeUnused(srv)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(s.limitListener(ln)) }()
	select {
	case err := <-errc:
		s.Close()
		s.CloseStorage()
		return fmt.Errorf("relay: serve: %w", err)
	case <-ctx.Done():
	}
	s.Close()
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		srv.Close()
	}
	if !s.waitStreams(sctx) && err == nil {
		err = sctx.Err()
	}
	if err != nil {
		err = fmt.Errorf("relay: shutdown: requests still running after %s were cut: %w", s.opts.ShutdownTimeout, err)
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = fmt.Errorf("relay: serve: %w", serr)
	}
	if cerr := s.CloseStorage(); cerr != nil && err == nil {
		err = fmt.Errorf("relay: closing the history: %w", cerr)
	}
	return err
}

// waitStreams waits for the streams served on hijacked connections, which
// http.Server.Shutdown does not see, to end after Close; at ctx's end it
// cuts off those left (their writes fail at once) and reports false.
func (s *Server) waitStreams(ctx context.Context) bool {
	done := make(chan struct{})
	go func() {
		s.hijacked.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
	}
	for _, c := range s.holdChannels() {
		c.mu.Lock()
		for sub := range c.subs {
			s.removeSub(c, sub)
			sub.cut()
		}
		c.mu.Unlock()
		s.release(c)
	}
	<-done
	return false
}

// closeUnused makes srv's Shutdown close, with its listeners, the
// connections that have not sent a request yet (http.StateNew): a client's
// transport dials one more than it uses, browsers and load balancers open
// them ahead. Shutdown counts such a connection as idle only once it is
// five seconds old, so without this every stop waited five seconds (past a
// short ShutdownTimeout, reported as requests cut). One that came a moment
// later would have been refused: closing it loses nothing. A request whose
// headers are on their way on a brand-new connection is refused the same
// way, and its sender retries.
func closeUnused(srv *http.Server) {
	var mu sync.Mutex
	unused := map[net.Conn]struct{}{}
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		if st == http.StateNew {
			unused[c] = struct{}{}
		} else {
			delete(unused, c)
		}
	}
	srv.RegisterOnShutdown(func() { // called once the listeners are closed
		mu.Lock()
		defer mu.Unlock()
		for c := range unused {
			c.Close()
		}
	})
}

// ListenURL returns the base URL of a listener's address, http://addr,
// with a loopback address in place of an unspecified one (0.0.0.0, ::) so
// that the URL can be opened on the same machine.
func ListenURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if ip.To4() != nil {
			host = "127.0.0.1"
		} else {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}

// ServeHTTP routes a request (see the package documentation for the routes).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	switch {
	case path == "/":
		if !allowMethods(w, r, http.MethodGet, http.MethodHead) {
			return
		}
		servePage(w, r, "index.html")
		return
	case path == "/new":
		if !allowMethods(w, r, http.MethodGet, http.MethodHead) {
			return
		}
		s.serveNew(w, r)
		return
	case path == "/healthz":
		if !allowMethods(w, r, http.MethodGet, http.MethodHead) {
			return
		}
		s.serveHealth(w, r)
		return
	case path == "/metrics" && s.opts.Metrics != nil:
		if !allowMethods(w, r, http.MethodGet, http.MethodHead) {
			return
		}
		s.opts.Metrics.ServeHTTP(w, r)
		return
	case path == "/version":
		// gosmee's client asks before it streams; without a "version" it
		// goes on (a version it finds newer than its own stops it).
		if !allowMethods(w, r, http.MethodGet, http.MethodHead) {
			return
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"server": "hookline"})
		return
	case path == "/favicon.ico":
		// What a browser asks for on a page that names no icon (a JSON
		// error, such as a private channel's 401).
		if !allowMethods(w, r, http.MethodGet, http.MethodHead) {
			return
		}
		serveAsset(w, r, "icon.svg")
		return
	case strings.HasPrefix(path, "/assets/"):
		if !allowMethods(w, r, http.MethodGet, http.MethodHead) {
			return
		}
		serveAsset(w, r, strings.TrimPrefix(path, "/assets/"))
		return
	}
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if err := ValidChannelName(segs[0]); err != nil {
		httpx.WriteError(w, http.StatusNotFound, err.Error())
		return
	}
	name := segs[0]
	switch {
	case len(segs) == 1:
		s.serveChannel(w, r, name)
	case len(segs) == 2 && name == "events":
		// gosmee's stream of channel segs[1]; "events" stays a channel.
		if !allowMethods(w, r, http.MethodGet) {
			return
		}
		if err := ValidChannelName(segs[1]); err != nil {
			httpx.WriteError(w, http.StatusNotFound, err.Error())
			return
		}
		if !s.authorize(w, r, segs[1]) {
			return
		}
		s.serveStream(w, r, segs[1], formatGosmee)
	case len(segs) == 3 && segs[1] == "body":
		if !allowMethods(w, r, http.MethodGet) || !s.authorize(w, r, name) {
			return
		}
		s.serveBody(w, r, name, segs[2])
	case len(segs) == 2 && bindings[segs[1]].path != "":
		if !allowMethods(w, r, http.MethodPut, http.MethodDelete) {
			return
		}
		s.serveBinding(w, r, name, bindings[segs[1]])
	case len(segs) == 3 && segs[1] == "redeliver":
		if !allowMethods(w, r, http.MethodPost) {
			return
		}
		s.serveRedeliver(w, r, name, segs[2])
	default:
		httpx.WriteError(w, http.StatusNotFound, fmt.Sprintf("no route %s; a channel is /<name>, a redelivery POST /<name>/redeliver/<id>", truncate(path, 200)))
	}
}

// ValidChannelName reports why name cannot be a channel name, or nil: 1 to
// MaxChannelNameLength characters of A-Z a-z 0-9 - _. The relay checks the
// name still escaped, so %2F and dots are rejected with the rest.
func ValidChannelName(name string) error {
	const rule = "channel names are 1 to 128 characters of A-Z a-z 0-9 - _"
	if name == "" {
		return errors.New("no channel in the path; " + rule + " (GET /new makes one)")
	}
	if len(name) > MaxChannelNameLength {
		return fmt.Errorf("channel name is %d characters long; %s", len(name), rule)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("no channel %q: %s", truncate(name, 64), rule)
		}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// allowMethods answers 405 (204 for an OPTIONS preflight) unless r's method
// is one of methods, and reports whether the handler should go on.
func allowMethods(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	allow := strings.Join(methods, ", ")
	w.Header().Set("Allow", allow+", OPTIONS")
	if r.Method == http.MethodOptions {
		setCORS(w, r, allow)
		w.WriteHeader(http.StatusNoContent)
		return false
	}
	httpx.WriteError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not allowed here; use %s", r.Method, allow))
	return false
}

// setCORS answers a CORS preflight the way smee.io's cors() middleware
// does: any origin, the requested headers.
func setCORS(w http.ResponseWriter, r *http.Request, methods string) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", methods)
	if req := r.Header.Get("Access-Control-Request-Headers"); req != "" && httpx.IsTokenList(req) {
		h.Set("Access-Control-Allow-Headers", req)
	}
	h.Set("Access-Control-Max-Age", "600")
}

// serveNew answers GET|HEAD /new with a 307 to a new channel, as smee.io
// does; a client that asks for text/plain, or says it is gosmee (its
// User-Agent), gets the URL as a line of text/plain with 200, as a gosmee
// server answers. (gosmee's --new-url asks a fixed address with Go's
// default client, no Accept header; hookline's --new sends the same, and
// reads both answers.) A client that asks for application/json gets
// {"url":…} (and "token" for a private channel).
//
// With ?private=1 (always, with Options.PrivateOnly) the channel is
// private: the JSON answer has its read token apart, the others give the
// URL with ?token=, which smee-client, gosmee and a browser can open as
// it is. This answer is the only time the token is shown.
func (s *Server) serveNew(w http.ResponseWriter, r *http.Request) {
	base, err := s.requestBase(r)
	if err != nil {
		httpx.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	name, token := "", ""
	if s.opts.PrivateOnly || truthy(r.URL.Query().Get("private")) {
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusOK) // a private channel is kept for good: not made for a HEAD
			return
		}
		var ok bool
		if name, token, ok = s.newPrivateChannel(w, r); !ok {
			return
		}
	} else {
		name = newChannelName()
	}
	u := base + "/" + name
	if accepts(r, "application/json") {
		answer := map[string]string{"url": u}
		if token != "" {
			answer["token"] = token
		}
		httpx.WriteJSON(w, http.StatusOK, answer)
		return
	}
	if token != "" {
		u += "?" + wire.TokenQuery + "=" + token
	}
	if wantsPlainNew(r) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, u+"\n")
		return
	}
	w.Header().Set("Location", u)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusTemporaryRedirect)
	io.WriteString(w, u+"\n") // what `curl <relay>/new` (no -L) prints
}

// wantsPlainNew reports whether r asks for /new's answer as text: Accept
// names text/plain, or the User-Agent is gosmee's.
func wantsPlainNew(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("User-Agent"), "gosmee/") || accepts(r, "text/plain")
}

// requestBase returns the base URL for channel URLs given to r's client.
func (s *Server) requestBase(r *http.Request) (string, error) {
	if s.opts.PublicURL != "" {
		return s.opts.PublicURL, nil
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := strings.ToLower(strings.TrimSpace(firstValue(r.Header.Get("X-Forwarded-Proto")))); p == "http" || p == "https" {
		scheme = p
	}
	host := r.Host
	if fh := strings.TrimSpace(firstValue(r.Header.Get("X-Forwarded-Host"))); fh != "" {
		host = fh
	}
	if !validHost(host) {
		return "", fmt.Errorf("cannot build a channel URL from host %q; start the relay with a public URL", truncate(host, 100))
	}
	return scheme + "://" + host, nil
}

func firstValue(v string) string {
	first, _, _ := strings.Cut(v, ",")
	return first
}

// validHost reports whether h looks like host[:port]: letters, digits and
// . - : [ ] only.
func validHost(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	for _, c := range []byte(h) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(".-:[]_", c) >= 0) {
			return false
		}
	}
	return true
}

// health is the /healthz document.
type health struct {
	Status        string `json:"status"`
	Error         string `json:"error,omitempty"`
	UptimeSeconds int64  `json:"uptimeSeconds"`
	// LostData is when the shared store's server (Redis) was last found
	// to have lost its data; its JSON name is from the one shared store.
	LostData *time.Time `json:"redisLostData,omitempty"`
	Stats
}

// healthTimeout bounds the shared store's ping of /healthz.
const healthTimeout = 2 * time.Second

func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	var storeErr error
	if s.shared != nil {
		ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
		storeErr = s.shared.Ping(ctx)
		cancel()
	}
	st := s.stats(r.Context(), storeErr == nil)
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	h := health{Status: "ok", UptimeSeconds: int64(time.Since(s.started) / time.Second), Stats: st}
	if s.shared != nil {
		if at := s.shared.Lost(); !at.IsZero() {
			h.LostData = &at
		}
	}
	code := http.StatusOK
	switch {
	case closed:
		h.Status = "shutting down"
		code = http.StatusServiceUnavailable
	case storeErr != nil:
		h.Status = strings.ToLower(s.shared.String()) + " unreachable"
		h.Error = strings.TrimPrefix(storeErr.Error(), "relay: ")
		code = http.StatusServiceUnavailable
	case writeFailed(s.writeErr.Load()):
		// Every POST gets 503 while the history cannot be written (a full
		// disk, a read-only file system): the relay is not healthy.
		h.Status = "history cannot be written"
		h.Error = strings.TrimPrefix(s.writeErr.Load().err.Error(), "relay: ")
		code = http.StatusServiceUnavailable
	case time.Since(time.Unix(0, s.refusedAt.Load())) < time.Minute:
		// Up, but refusing uploads: the budget for bodies in flight was
		// full within the last minute (a flood, or too small a budget).
		h.Status = "degraded"
		h.Error = "uploads were refused in the last minute: the bodies in flight filled --max-upload-bytes"
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, code, h)
}

func writeFailed(f *writeFailure) bool { return f != nil && time.Since(f.at) < writeFailureTTL }

// serveChannel serves GET|HEAD (stream or page), POST (ingest) and OPTIONS
// on /<name>.
func (s *Server) serveChannel(w http.ResponseWriter, r *http.Request, name string) {
	switch r.Method {
	case http.MethodPost:
		s.ingest(w, r, name)
	case http.MethodGet, http.MethodHead:
		if hs, ok := provider.HandshakeOf(r.Header, r.URL.Query(), nil); ok && r.Method == http.MethodGet {
			s.answerHub(w, r, name, hs) // before authorize: the hub has no read token
			return
		}
		if !s.authorize(w, r, name) {
			return
		}
		if r.Method == http.MethodGet && accepts(r, "text/event-stream") {
			s.serveStream(w, r, name, requestedFormat(r))
			return
		}
		servePage(w, r, "channel.html")
	default:
		allowMethods(w, r, http.MethodGet, http.MethodHead, http.MethodPost)
	}
}

// accepts reports whether r's Accept lists the media type mt.
func accepts(r *http.Request, mt string) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			t, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(t), mt) {
				return true
			}
		}
	}
	return false
}

// ingest answers POST /<name>: the delivery is recorded and pushed to every
// subscriber.
func (s *Server) ingest(w http.ResponseWriter, r *http.Request, name string) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if n := headerBytes(r); n > maxHeaderBytes {
		httpx.WriteError(w, http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf("the request headers take %d bytes; the relay accepts %d (clients such as smee-client would send them on to Node servers, which refuse more)", n, maxHeaderBytes))
		return
	}
	if name := notUTF8Header(r.Header); name != "" {
		httpx.WriteError(w, http.StatusBadRequest, fmt.Sprintf("the value of header %s is not valid UTF-8: the relay carries header values as text and would have to change its bytes; send it as UTF-8 (or percent-encoded)", name))
		return
	}
	body, release, err := s.readBody(w, r, s.clientIP(r))
	defer release()
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, errBusy):
		w.Header().Set("Retry-After", "1")
		httpx.WriteError(w, http.StatusServiceUnavailable, strings.TrimPrefix(err.Error(), "relay: ")+"; retry in a moment")
		return
	case errors.Is(err, errTooSlow):
		w.Header().Set("Connection", "close") // the rest of its body is never read
		httpx.WriteError(w, http.StatusRequestTimeout, strings.TrimPrefix(err.Error(), "relay: "))
		return
	case errors.As(err, &mbe):
		s.tooLarge(w, r.ContentLength)
		return
	case err != nil:
		httpx.WriteError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	verified, ok := s.admitPost(w, r, name, body)
	if !ok {
		return
	}
	// Slack's url_verification, signed with the secret the channel is
	// bound to, is answered (see answerHub); on another channel it is
	// relayed as any POST, unanswered.
	hs, handshake := provider.HandshakeOf(r.Header, nil, body)
	handshake = handshake && verified && len(hs.Challenge) <= maxChallengeBytes
	var d *Entry
	if handshake {
		d = handshakeEntry(r, body, time.Now())
	} else {
		d = NewEntry(r, body, time.Now())
	}
	// Once the body is read, the delivery is stored even if the sender
	// hangs up: it may be one whose answer is all that got lost.
	ctx := context.WithoutCancel(r.Context())
	p, err := s.publish(ctx, name, d)
	switch {
	case errors.Is(err, errKeyReused):
		httpx.WriteError(w, http.StatusUnprocessableEntity, fmt.Sprintf("the Idempotency-Key %q was already used for delivery %d of this channel, with a different body; use a new key for a new delivery", truncate(headerValue(d.header, idempotencyHeader), 64), p.id))
		return
	case err != nil:
		s.storeFailed(w, "delivery", name, err)
		return
	case p.duplicate:
		s.log.Info("duplicate delivery not relayed again", "channel", name, "id", p.id, "idempotencyKey", truncate(headerValue(d.header, idempotencyHeader), 64))
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"id": p.id, "duplicate": true})
		return
	}
	if s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.Debug("delivery", "channel", name, "id", p.id, "bytes", len(body), "subscribers", p.queued, "event", headerValue(d.header, "x-github-event"))
	}
	if handshake {
		s.log.Info("handshake answered", "channel", name, "kind", hs.Kind, "id", p.id)
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"challenge": hs.Challenge})
		return
	}
	answer := postAnswer{ID: p.id}
	if s.shared == nil {
		// How many streams got it: 0 tells a sender nobody is listening
		// (replicas sharing Redis cannot know the others' streams).
		answer.Subscribers = &p.queued
	}
	httpx.WriteJSON(w, http.StatusOK, answer)
}

// postAnswer is the answer to a POST that was relayed.
type postAnswer struct {
	ID          int64 `json:"id"`
	Subscribers *int  `json:"subscribers,omitempty"`
}

// storeFailed answers a request the history store could not serve: 503,
// retry later (nothing was relayed).
func (s *Server) storeFailed(w http.ResponseWriter, what, name string, err error) {
	s.log.Error("history store failed", "channel", name, "err", err)
	retry := "1"
	msg := "the relay could not store the " + what + " (" + err.Error() + "); it was not relayed: retry later"
	server := "history store"
	if s.shared != nil {
		server = s.shared.String()
	}
	switch {
	case errors.Is(err, ErrStoreClosed):
		msg = "the relay is shutting down; the " + what + " was not relayed: retry in a moment"
	case errors.Is(err, ErrStoreNotReplicated):
		retry = "2"
		msg = "the relay's " + server + " has not copied the " + what + " to enough replicas yet, so it is not safe: it was not relayed; retry in a moment, with the same Idempotency-Key header if it has one (" + strings.TrimPrefix(err.Error(), "relay: ") + ")"
	case errors.Is(err, ErrStoreUncertain):
		retry = "5"
		msg = "the connection to the relay's " + server + " broke while storing the " + what + ", which may or may not have been stored and relayed: retry in a moment, with the same Idempotency-Key header if it has one (" + strings.TrimPrefix(err.Error(), "relay: ") + ")"
	case errors.Is(err, ErrStoreUnavailable) && what == "stream's replay":
		retry = "5"
		msg = "the relay's " + server + " does not answer: reconnect in a moment with the same Last-Event-ID, nothing will be lost (" + strings.TrimPrefix(err.Error(), "relay: ") + ")"
	case errors.Is(err, ErrStoreUnavailable):
		retry = "5"
		msg = "the relay's " + server + " does not answer, so the " + what + " was not stored nor relayed: retry in a moment (" + strings.TrimPrefix(err.Error(), "relay: ") + ")"
	}
	w.Header().Set("Retry-After", retry)
	httpx.WriteError(w, http.StatusServiceUnavailable, msg)
}

func (s *Server) tooLarge(w http.ResponseWriter, n int64) {
	s.refusedTooLarge.Add(1)
	size := "more than that"
	if n >= 0 {
		size = strconv.FormatInt(n, 10) + " bytes"
	}
	httpx.WriteError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than the relay's limit of %d bytes (%s); GitHub never sends more than 25 MiB", s.opts.MaxBodyBytes, size))
}

func headerValue(h []wire.Header, name string) string {
	for _, f := range h {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// serveRedeliver answers POST /<name>/redeliver/<id>: the delivery with that
// id, still in the history, is published again with a new id and timestamp
// and its stored headers, query and body. Nothing of the redeliver request
// itself (headers, body, query) is used, so it cannot add or change headers.
func (s *Server) serveRedeliver(w http.ResponseWriter, r *http.Request, name, idText string) {
	id, err := strconv.ParseInt(idText, 10, 64)
	if err != nil || id <= 0 {
		httpx.WriteError(w, http.StatusNotFound, fmt.Sprintf("no delivery %q: ids are positive integers", truncate(idText, 32)))
		return
	}
	// The client's budget bounds its lookups; the channel's is spent only
	// on a delivery that exists, so a stranger asking for ids that do not
	// exist cannot use up the owner's redeliveries.
	tooMany := func(wait time.Duration) {
		s.refusedRedeliveries.Add(1)
		w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)+1))
		httpx.WriteError(w, http.StatusTooManyRequests, fmt.Sprintf("too many redeliveries (the relay allows %d a minute per channel and per client); retry in %s", s.opts.RedeliveriesPerMinute, wait.Round(time.Second)+time.Second))
	}
	if ok, wait, _ := s.redeliver.allow(time.Now(), "client "+s.clientIP(r)); !ok {
		tooMany(wait)
		return
	}
	if !s.authorize(w, r, name) {
		return
	}
	d, err := s.store.Get(r.Context(), name, id)
	if err != nil {
		s.storeFailed(w, "redelivery", name, err)
		return
	}
	if d == nil {
		httpx.WriteError(w, http.StatusNotFound, fmt.Sprintf("delivery %d of this channel is not in the relay's history (never received, or expired)", id))
		return
	}
	if ok, wait, _ := s.redeliver.allow(time.Now(), "channel "+name); !ok {
		tooMany(wait)
		return
	}
	nd := d.Redelivery(time.Now())
	p, err := s.publish(context.WithoutCancel(r.Context()), name, nd)
	if err != nil {
		s.storeFailed(w, "redelivery", name, err)
		return
	}
	s.log.Info("redelivery", "channel", name, "of", id, "id", p.id, "subscribers", p.queued)
	httpx.WriteJSON(w, http.StatusOK, map[string]int64{"id": p.id, "redeliveryOf": id})
}
