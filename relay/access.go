package relay

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hookline/hookline/internal/httpx"
	"github.com/hookline/hookline/internal/wire"
	"github.com/hookline/hookline/webhooks/provider"
)

// Private channels.
//
// A channel made with GET /new?private=1 (every channel, with
// Options.PrivateOnly) has a read token: 130 random bits, given once in
// /new's answer and never again. Reading the channel (its stream in every
// format, its page, its body links, a redelivery, binding a secret) needs
// the token, as "Authorization: Bearer <token>" or "?token=<token>" (for
// EventSource and a browser, which cannot send a header); POSTs stay open,
// since a webhook sender authenticates by signature only. A store keeps
// the SHA-256 of the token, never the token (it has 130 random bits: a
// fast hash is enough), and the relay compares hashes in constant time.
// The relay never logs a request's URL or headers.
//
// A channel bound to a secret (PUT /<channel>/secret with the token, or
// Options.ChannelSecrets) keeps only deliveries whose signature verifies
// with it (any scheme of webhooks/provider, detected from the headers) and
// answers 401 to the rest, so a leaked URL cannot fill its history. The
// secret is stored as given (verifying needs it).

// Access is what a store keeps of a private channel.
type Access struct {
	TokenSum [sha256.Size]byte // the SHA-256 of the read token
	Secret   string            // the webhook secret POSTs must be signed with; "" for none
	// VerifyToken is the hub.verify_token a hub's handshake must carry for
	// the relay to answer it; "" for none (see answerHub).
	VerifyToken string
	Created     time.Time
	// Network is the client network that made the channel (an IPv4
	// address, an IPv6 /48), for Limits.PrivatePerNetwork; "" for a
	// channel made before the relay recorded it.
	Network string
	// Used is the channel's last use the store recorded (Store.TouchAccess:
	// a delivery received, a reader); zero if never. PutAccess does not
	// change it.
	Used time.Time
}

// lastUse is when a was last used, or made if never.
func (a *Access) lastUse() time.Time {
	if a.Used.IsZero() {
		return a.Created
	}
	return a.Used
}

// Errors of Store.PutAccess.
var (
	// ErrChannelExists: the channel is private already (a new one is
	// never made over it).
	ErrChannelExists = errors.New("relay: the channel exists")
	// ErrTooManyPrivate: the store holds Limits.PrivateChannels already,
	// each of them used.
	ErrTooManyPrivate = errors.New("relay: the relay holds as many private channels as it may")
	// ErrNetworkShare: the client network making the channel holds
	// Limits.PrivatePerNetwork already.
	ErrNetworkShare = errors.New("relay: the client's network holds as many private channels as it may")
)

// DefaultMaxPrivateChannels is Options.MaxPrivateChannels' default.
const DefaultMaxPrivateChannels = 100_000

// DefaultPrivateChannelTTL is Options.PrivateChannelTTL's default: a
// private channel that received nothing and had no reader for a week is
// removed.
const DefaultPrivateChannelTTL = 7 * 24 * time.Hour

// How fast strangers may make private channels (GET /new?private=1):
// privateChannelsPerMinute per client network (an IPv4 address, an IPv6
// /48: holderOf), in bursts of privateChannelBurst, and
// relayChannelsPerMinute for the whole relay, in bursts of
// relayChannelBurst. Each network holds at most its share of
// MaxPrivateChannels (privateShare).
const (
	privateChannelsPerMinute = 10
	privateChannelBurst      = 10
	relayChannelsPerMinute   = 120
	relayChannelBurst        = 60
)

// privateShare is the private channels one client network may hold: a
// hundredth of the relay's limit, and at least 10.
func privateShare(limit int) int { return max(limit/100, 10) }

// MarshalJSON and UnmarshalJSON give the stored form of an Access (the
// bbolt file and Redis keep the same bytes): the token's hash in hex.
func (a Access) MarshalJSON() ([]byte, error) {
	return json.Marshal(storedAccess{TokenSHA256: hex.EncodeToString(a.TokenSum[:]), Secret: a.Secret, VerifyToken: a.VerifyToken, Created: a.Created.UTC(), Network: a.Network, Used: a.Used.UTC()})
}

func (a *Access) UnmarshalJSON(b []byte) error {
	var s storedAccess
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	sum, err := hex.DecodeString(s.TokenSHA256)
	if err != nil || len(sum) != sha256.Size {
		return fmt.Errorf("relay: a private channel's record has no valid token hash")
	}
	*a = Access{Secret: s.Secret, VerifyToken: s.VerifyToken, Created: s.Created, Network: s.Network, Used: s.Used}
	copy(a.TokenSum[:], sum)
	return nil
}

type storedAccess struct {
	TokenSHA256 string    `json:"tokenSHA256"`
	Secret      string    `json:"secret,omitempty"`
	VerifyToken string    `json:"verifyToken,omitempty"`
	Created     time.Time `json:"created"`
	Network     string    `json:"network,omitempty"`
	Used        time.Time `json:"used,omitzero"`
}

// newToken returns a read token and its Access.
func newToken(now time.Time) (string, Access) {
	t := rand.Text() // 26 base32 characters: 130 bits
	return t, Access{TokenSum: sha256.Sum256([]byte(t)), Created: now}
}

// requestToken returns the read token r carries: the bearer token of its
// Authorization header, or its token query parameter.
func requestToken(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		if scheme, t, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(t)
		}
	}
	return r.URL.Query().Get(wire.TokenQuery)
}

// access returns channel name's Access (nil for a public one), or answers
// r and reports ok false: 503 when the store fails, 404 when the channel
// can only be private and is not (a private channel's name the store does
// not know, or any name with Options.PrivateOnly). Only a private
// channel's name (PrivatePrefix) can have an Access: a public channel
// costs no lookup, and works as before while a shared store is down.
func (s *Server) access(w http.ResponseWriter, r *http.Request, name string) (a *Access, ok bool) {
	if IsPrivateName(name) {
		var err error
		if a, err = s.store.Access(r.Context(), name); err != nil {
			s.storeFailed(w, "request", name, err)
			return nil, false
		}
	}
	if a == nil && (s.opts.PrivateOnly || IsPrivateName(name)) {
		s.unknownPrivate(w, name)
		return nil, false
	}
	return a, true
}

// authorize answers a read of channel name (stream, page, body, redelivery)
// that its Access does not allow, and reports whether to go on: a private
// channel needs its token; with Options.PrivateOnly, a channel that is not
// private does not exist.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, name string) bool {
	a, ok := s.access(w, r, name)
	if !ok || a == nil {
		return ok
	}
	if !s.tokenMatches(w, r, a) {
		return false
	}
	s.touch(r.Context(), name, a.Used)
	return true
}

// touch records a use of private channel name (a reader, a delivery) for
// Options.PrivateChannelTTL, unless the last one recorded (last) is
// recent: at most one store write per touchEvery. It returns the use now
// recorded. A store that fails is logged: the request goes on.
func (s *Server) touch(ctx context.Context, name string, last time.Time) time.Time {
	now := time.Now()
	if now.Sub(last) < s.touchEvery() {
		return last
	}
	if err := s.store.TouchAccess(context.WithoutCancel(ctx), name, now); err != nil {
		s.log.Warn("recording a private channel's use failed", "channel", name, "err", err)
		return last
	}
	return now
}

// touchEvery is how often a private channel in use records it: an eighth
// of Options.PrivateChannelTTL, at most an hour.
func (s *Server) touchEvery() time.Duration { return min(s.opts.PrivateChannelTTL/8, time.Hour) }

// expireEvery is how often the relay removes the private channels unused
// for Options.PrivateChannelTTL: at most every quarter of it, and every
// ten minutes at most, when GET /new?private=1 is asked (a relay that
// makes no private channel never grows).
func (s *Server) expireEvery() time.Duration { return min(s.opts.PrivateChannelTTL/4, 10*time.Minute) }

// expirePrivate removes the private channels unused for
// Options.PrivateChannelTTL, if the last time is expireEvery ago: those
// with a stream on this relay are recorded as used first.
func (s *Server) expirePrivate(ctx context.Context) {
	now := time.Now()
	last := s.expired.Load()
	if now.UnixNano()-last < int64(s.expireEvery()) || !s.expired.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	ctx = context.WithoutCancel(ctx)
	s.mu.Lock()
	var read []string
	for name, c := range s.channels {
		if IsPrivateName(name) && c.nsubs.Load() > 0 {
			read = append(read, name)
		}
	}
	s.mu.Unlock()
	for _, name := range read {
		s.touch(ctx, name, time.Time{})
	}
	gone, err := s.store.ExpireAccess(ctx, now.Add(-s.opts.PrivateChannelTTL))
	for _, name := range gone {
		s.counts.remove(name)
	}
	if len(gone) > 0 || err != nil {
		s.log.Info("unused private channels removed", "channels", len(gone), "unusedFor", s.opts.PrivateChannelTTL.String(), "err", err)
	}
}

// tokenMatches reports whether r carries the read token of a private
// channel whose Access is a, and answers 401 when it does not.
func (s *Server) tokenMatches(w http.ResponseWriter, r *http.Request, a *Access) bool {
	token := requestToken(r)
	sum := sha256.Sum256([]byte(token))
	if token != "" && subtle.ConstantTimeCompare(sum[:], a.TokenSum[:]) == 1 {
		return true
	}
	s.refusedUnauthorized.Add(1)
	w.Header().Set("WWW-Authenticate", `Bearer realm="hookline"`)
	msg := "this channel is private: send its read token, as Authorization: Bearer <token> or ?token=<token> (hookline forward finds the one it was given in its state directory)"
	if token != "" {
		msg = "this channel's read token is not the one sent: use the token GET /new?private=1 gave with the channel"
	}
	httpx.WriteError(w, http.StatusUnauthorized, msg)
	return false
}

// unknownPrivate answers a request for channel name, which can only be
// private and is not (a private channel's name, or any with
// Options.PrivateOnly).
func (s *Server) unknownPrivate(w http.ResponseWriter, name string) {
	msg := "no such channel: this relay serves private channels only (GET /new makes one, with its read token)"
	if IsPrivateName(name) {
		msg = "no such private channel on this relay: it was made by another relay, or by this one before it restarted without a data directory or lost its Redis data; make a new one (GET /new?private=1, hookline forward --new --private)"
	}
	httpx.WriteError(w, http.StatusNotFound, msg)
}

// PrivatePrefix starts the name of every private channel, and only theirs:
// a channel of that name that the store does not know as private (the
// relay lost it: memory only, Redis data lost) does not exist, rather than
// becoming public to whoever has its URL.
const PrivatePrefix = "private-"

// IsPrivateName reports whether name is a private channel's.
func IsPrivateName(name string) bool { return strings.HasPrefix(name, PrivatePrefix) }

// admitPost checks a POST to channel name against its Access: with
// Options.PrivateOnly the channel must be private, and a channel bound to
// a secret takes only deliveries signed with it. It reports whether the
// delivery verified with that secret, and whether to go on; it answers
// the POST when it refuses it.
func (s *Server) admitPost(w http.ResponseWriter, r *http.Request, name string, body []byte) (verified, ok bool) {
	secret := s.opts.ChannelSecrets[name]
	a, ok := s.access(w, r, name)
	if !ok {
		return false, false
	}
	if a != nil {
		s.touch(r.Context(), name, a.Used) // a delivery to it, signed or not, shows it in use
		if secret == "" {
			secret = a.Secret
		}
	}
	if secret == "" {
		return false, true
	}
	scheme := provider.Detect(r.Header)
	err := provider.ErrNoSignature
	if scheme != "" {
		err = provider.Verify(scheme, r.Header, body, provider.Check{Secrets: []string{secret}})
	}
	if err == nil {
		return true, true
	}
	s.refusedUnsigned.Add(1)
	httpx.WriteError(w, http.StatusUnauthorized, "this channel keeps only deliveries signed with its webhook secret, and this one's signature does not verify: "+err.Error())
	return false, false
}

// Handshakes.
//
// A sender that checks a URL before it delivers there (webhooks/provider
// HandshakeOf) is answered by the relay, on a channel whose owner made it
// possible, and never otherwise: a public relay must not prove control of
// a URL for whoever asks. Slack's url_verification is answered on a channel
// bound to a secret (the Slack signing secret) when its signature
// verifies; a hub's GET ?hub.mode=subscribe&hub.challenge= (WebSub, Meta,
// Strava) when its hub.verify_token is the channel's verify token (PUT
// /<channel>/verify-token, or Options.ChannelVerifyTokens). An answered
// handshake is relayed, marked (wire.HandshakeHeader), so that the
// channel's forward shows it; a Slack url_verification that is not
// answered is relayed as any POST, and a hub's check with a wrong token is
// refused (403) and relayed to nobody.

// maxChallengeBytes bounds the challenge the relay sends back.
const maxChallengeBytes = 1 << 10

// answerHub answers a hub's GET handshake hs to channel name.
func (s *Server) answerHub(w http.ResponseWriter, r *http.Request, name string, hs provider.Handshake) {
	a, ok := s.access(w, r, name)
	if !ok {
		return
	}
	token := s.opts.ChannelVerifyTokens[name]
	if token == "" && a != nil {
		token = a.VerifyToken
	}
	switch {
	case token == "":
		httpx.WriteError(w, http.StatusForbidden, "this channel has no verify token, so the relay does not answer hub.challenge for it: set one (hookline forward --hub-verify-token, or serve --channel-secrets with a <channel>.verify-token file) and give the sender the same")
		return
	case subtle.ConstantTimeCompare([]byte(hs.VerifyToken), []byte(token)) != 1:
		s.refusedUnsigned.Add(1)
		httpx.WriteError(w, http.StatusForbidden, "hub.verify_token is not this channel's verify token")
		return
	case len(hs.Challenge) > maxChallengeBytes:
		httpx.WriteError(w, http.StatusBadRequest, fmt.Sprintf("hub.challenge is longer than %d bytes", maxChallengeBytes))
		return
	}
	if a != nil {
		s.touch(r.Context(), name, a.Used)
	}
	if _, err := s.publish(context.WithoutCancel(r.Context()), name, handshakeEntry(r, nil, time.Now())); err != nil {
		s.log.Warn("an answered handshake was not relayed", "channel", name, "err", err)
	}
	s.log.Info("handshake answered", "channel", name, "kind", hs.Kind)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	io.WriteString(w, hs.Challenge)
}

// maxSecretBytes bounds a secret PUT to /<channel>/secret, or a verify
// token to /<channel>/verify-token.
const maxSecretBytes = 4 << 10

// binding is what PUT /<channel>/<path> sets on a private channel.
type binding struct {
	path   string // secret, verify-token
	what   string // in messages
	answer string // the answer's key: whether the channel is bound
	field  func(*Access) *string
}

// bindings are the PUT /<channel>/<path> routes, by path.
var bindings = map[string]binding{
	"secret":       {"secret", "webhook secret", "verifyOnRelay", func(a *Access) *string { return &a.Secret }},
	"verify-token": {"verify-token", "hub.verify_token", "answersHubChallenge", func(a *Access) *string { return &a.VerifyToken }},
}

// serveBinding answers PUT /<name>/secret (the body is the secret, bound to
// the channel from now on) or /<name>/verify-token (the token a hub's
// handshake must carry), and DELETE (unbound), with the channel's token.
func (s *Server) serveBinding(w http.ResponseWriter, r *http.Request, name string, b binding) {
	a, ok := s.access(w, r, name)
	if !ok {
		return
	}
	if a == nil {
		httpx.WriteError(w, http.StatusConflict, "only a private channel stores a "+b.what+" (GET /new?private=1 makes one); serve --channel-secrets binds any channel")
		return
	}
	if !s.tokenMatches(w, r, a) {
		return
	}
	value := ""
	if r.Method == http.MethodPut {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSecretBytes))
		if err != nil {
			httpx.WriteError(w, http.StatusBadRequest, fmt.Sprintf("reading the %s (at most %d bytes): %v", b.what, maxSecretBytes, err))
			return
		}
		if value = strings.TrimSpace(string(body)); value == "" {
			httpx.WriteError(w, http.StatusBadRequest, "the body is empty: PUT the "+b.what+", or DELETE to unbind it")
			return
		}
	}
	*b.field(a) = value
	if err := s.store.PutAccess(context.WithoutCancel(r.Context()), name, *a, false); err != nil {
		s.storeFailed(w, b.what, name, err)
		return
	}
	s.log.Info("channel "+b.path+" set", "channel", name, "bound", value != "")
	httpx.WriteJSON(w, http.StatusOK, map[string]bool{b.answer: value != ""})
}

// newPrivateChannel makes a private channel for r's client and returns its
// name and token; on failure it has answered r.
//
// A client network (holderOf) makes privateChannelsPerMinute and holds its
// privateShare; the relay makes relayChannelsPerMinute. When the relay
// holds Options.MaxPrivateChannels, the oldest channel never used makes
// room (a channel someone reads or posts to is never taken), and the
// channels unused for Options.PrivateChannelTTL are removed first.
func (s *Server) newPrivateChannel(w http.ResponseWriter, r *http.Request) (name, token string, ok bool) {
	ip := s.clientIP(r)
	network := holderOf(ip)
	if allowed, wait, all := s.creations.allow(time.Now(), network); !allowed {
		who := fmt.Sprintf("from your network (%s), %d a minute", network, privateChannelsPerMinute)
		if all {
			who = fmt.Sprintf("on this relay, %d a minute", relayChannelsPerMinute)
		}
		w.Header().Set("Retry-After", fmt.Sprint(int(wait/time.Second)+1))
		httpx.WriteError(w, http.StatusTooManyRequests, fmt.Sprintf("too many private channels made %s; retry in %s", who, wait.Round(time.Second)+time.Second))
		return "", "", false
	}
	s.expirePrivate(r.Context())
	token, a := newToken(time.Now())
	a.Network = network
	name = PrivatePrefix + newChannelName()
	err := s.store.PutAccess(context.WithoutCancel(r.Context()), name, a, true)
	switch {
	case errors.Is(err, ErrNetworkShare):
		w.Header().Set("Retry-After", "3600")
		httpx.WriteError(w, http.StatusTooManyRequests, fmt.Sprintf("your network (%s) holds %d private channels, its share of this relay; one unused for %s is removed", network, privateShare(s.opts.MaxPrivateChannels), s.opts.PrivateChannelTTL))
		return "", "", false
	case errors.Is(err, ErrTooManyPrivate):
		w.Header().Set("Retry-After", "3600")
		httpx.WriteError(w, http.StatusServiceUnavailable, fmt.Sprintf("the relay holds %d private channels, its limit (serve --max-private-channels), and each is in use", s.opts.MaxPrivateChannels))
		return "", "", false
	case err != nil:
		s.storeFailed(w, "private channel", name, err)
		return "", "", false
	}
	s.log.Info("private channel made", "channel", name, "client", ip)
	return name, token, true
}
