package redisstore

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookline/hookline/relay"
)

// feedTimeout is how long the feed waits for a pub/sub message before it
// pings Redis; a second wait without an answer means the connection is
// dead (a silent network failure), and the feed opens a new one.
const feedTimeout = 15 * time.Second

// feed reports the deliveries of the watched channels (those with
// subscribers on this relay), whichever relay appended them, to handle.
//
// It subscribes through pub/sub connections (subs): on one Redis one
// connection for every channel (SUBSCRIBE); in a Cluster one per primary
// that holds a watched channel, each channel asked on its own (SSUBSCRIBE
// takes the channels of one hash slot at a time), so that a delivery
// reaches only the relays that watch its channel, from its own shard. A
// connection that fails is dropped with its channels, which are asked
// again on a new one (from the primary that holds them now, after a
// failover), never resubscribed by go-redis on the old one; each
// (re)subscription is reported as handle(name, nil), so that the Server
// reads what it may have missed from the stream.
type feed struct {
	s      *Store
	handle func(channel string, d *relay.Entry)

	mu      sync.Mutex
	want    map[string]bool // channels to watch
	on      map[string]*sub // channels asked, and on which connection
	subs    map[string]*sub // connections, by primary address ("" on one Redis)
	stopped bool            // stop has begun: no connection opens
	broken  bool            // a connection failed, and none has subscribed since
	retry   time.Duration   // the pause after a failure before asking again

	wake chan struct{} // capacity 1: want changed
	lost chan struct{} // capacity 1: a connection failed
	done chan struct{}
	wg   sync.WaitGroup
}

// sub is one pub/sub connection.
type sub struct {
	addr      string
	ps        *redis.PubSub
	ask, drop func(context.Context, ...string) error // SUBSCRIBE and UNSUBSCRIBE, or in a Cluster SSUBSCRIBE and SUNSUBSCRIBE
}

// StartFeed starts reporting deliveries of watched channels to handle (see
// relay.SharedStore).
func (s *Store) StartFeed(handle func(channel string, d *relay.Entry)) {
	f := &feed{
		s:      s,
		handle: handle,
		want:   map[string]bool{},
		on:     map[string]*sub{},
		subs:   map[string]*sub{},
		wake:   make(chan struct{}, 1),
		lost:   make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	s.mu.Lock()
	s.feed = f
	s.mu.Unlock()
	f.wg.Add(1)
	go f.reconcile()
	if s.cluster == nil {
		// The one connection, opened now: the first stream's subscription
		// then costs one command, not a connection too.
		f.mu.Lock()
		f.open("", s.rdb.Subscribe(s.ctx))
		f.mu.Unlock()
	}
}

// Watch sets whether channel is watched. It does not wait for Redis: the
// feed asks Redis in the background, and from now on reports channel's
// deliveries (on) or no longer does (off) even if Redis still sends them.
func (s *Store) Watch(channel string, on bool) {
	s.mu.Lock()
	f := s.feed
	s.mu.Unlock()
	if f == nil {
		return
	}
	f.mu.Lock()
	if on {
		f.want[channel] = true
	} else {
		delete(f.want, channel)
	}
	f.mu.Unlock()
	f.poke()
}

func (f *feed) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// stop ends the feed's goroutines.
func (f *feed) stop() {
	close(f.done)
	f.s.cancel() // ends calls to Redis in progress
	f.mu.Lock()
	f.stopped = true // no receive starts from now on
	for _, c := range f.subs {
		c.ps.Close() // ends a blocked receive
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// reconcile subscribes and unsubscribes as want changes and as
// connections fail, and keeps the presence keys of the watched channels
// alive.
func (f *feed) reconcile() {
	defer f.wg.Done()
	refresh := time.NewTicker(presenceTTL / 3)
	defer refresh.Stop()
	var again <-chan time.Time // after a failure: when to ask again
	for {
		var all bool
		select {
		case <-f.done:
			return
		case <-f.wake:
		case <-f.lost:
			// Wait a moment before asking again, so that a Redis that is
			// down is not asked in a loop.
			if again == nil {
				f.mu.Lock()
				again = time.After(f.retry)
				f.mu.Unlock()
			}
			continue
		case <-again:
			again = nil
		case <-refresh.C:
			all = true
		}
		f.mu.Lock()
		var add, present, del []string
		var from []*sub // the connection of each of del
		for c := range f.want {
			if f.on[c] == nil {
				add = append(add, c)
			}
			if all {
				present = append(present, c)
			}
		}
		for c, on := range f.on {
			if !f.want[c] {
				del, from = append(del, c), append(from, on)
				delete(f.on, c)
			}
		}
		f.mu.Unlock()
		// Asked to stop; Redis may send a little more, which receive
		// leaves out (wanted).
		for j, c := range del {
			from[j].drop(f.s.ctx, f.s.feedChannel(c))
		}
		if !all {
			present = add
		}
		for _, c := range add {
			f.subscribe(c)
		}
		f.markPresent(present)
	}
}

// subscribe asks for channel on the connection to the primary that holds
// it, opening that connection first if there is none.
func (f *feed) subscribe(channel string) {
	ch := f.s.feedChannel(channel)
	addr, newPS := "", func() *redis.PubSub { return f.s.rdb.Subscribe(f.s.ctx) }
	if f.s.cluster != nil {
		ctx, cancel := context.WithTimeout(f.s.ctx, redisTimeout)
		primary, err := f.s.cluster.MasterForKey(ctx, ch)
		cancel()
		if err != nil {
			f.failed(nil, err)
			return
		}
		addr, newPS = primary.Options().Addr, func() *redis.PubSub { return primary.SSubscribe(f.s.ctx) }
	}
	f.mu.Lock()
	c := f.subs[addr]
	if c == nil {
		c = f.open(addr, newPS())
	}
	f.mu.Unlock()
	err := c.ask(f.s.ctx, ch)
	f.mu.Lock()
	alive := f.subs[addr] == c
	if err == nil && alive {
		f.on[channel] = c
	}
	f.mu.Unlock()
	switch {
	case err != nil && alive:
		f.failed(c, err)
	case !alive: // it failed meanwhile: ask again on another
		f.failed(nil, errors.New("the connection closed"))
	}
}

// open starts using ps, a pub/sub connection to addr ("" on one Redis),
// and its receive (f.mu held).
func (f *feed) open(addr string, ps *redis.PubSub) *sub {
	c := &sub{addr: addr, ps: ps, ask: ps.Subscribe, drop: ps.Unsubscribe}
	if f.s.cluster != nil {
		c.ask, c.drop = ps.SSubscribe, ps.SUnsubscribe // shard channels, one at a time
	}
	if f.stopped {
		ps.Close() // its use fails, and nothing waits for it
		return c
	}
	f.subs[addr] = c
	f.wg.Add(1)
	go f.receive(c)
	return c
}

// failed drops connection c (nil: none was opened) after err: its
// channels are asked again, on a new connection, after a pause that
// doubles with each failure (to a second) until a subscription succeeds.
func (f *feed) failed(c *sub, err error) {
	f.mu.Lock()
	if c != nil && f.subs[c.addr] != c {
		f.mu.Unlock()
		return // dropped already: its receive ends on the closed connection
	}
	if c != nil {
		delete(f.subs, c.addr)
		for name, on := range f.on {
			if on == c {
				delete(f.on, name)
			}
		}
	}
	first := !f.broken
	f.broken = true
	f.retry = min(max(2*f.retry, 50*time.Millisecond), time.Second)
	f.mu.Unlock()
	if c != nil {
		c.ps.Close()
	}
	f.s.reloadSlots()
	select {
	case <-f.done:
		return
	default:
	}
	if first {
		f.s.log.Warn("lost the Redis pub/sub connection; streams stay open and catch up when it is back", "redis", f.s.where, "err", err)
	}
	select {
	case f.lost <- struct{}{}:
	default:
	}
}

// markPresent sets (or refreshes) the presence keys of channels.
func (f *feed) markPresent(channels []string) {
	if len(channels) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(f.s.ctx, redisTimeout)
	defer cancel()
	f.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, c := range channels {
			_, _, _, _, h := f.s.keys(c)
			p.Set(ctx, h, "1", presenceTTL)
		}
		return nil
	})
}

// receive reads connection c and reports what it gets, until it fails or
// the feed stops.
func (f *feed) receive(c *sub) {
	defer f.wg.Done()
	pinged := false
	for {
		msg, err := c.ps.ReceiveTimeout(f.s.ctx, feedTimeout)
		select {
		case <-f.done:
			return
		default:
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged {
				pinged = true
				c.ps.Ping(f.s.ctx)
				continue
			}
			if errors.As(err, &ne) && ne.Timeout() {
				err = errors.New("no answer to a ping")
			}
			f.failed(c, err)
			return
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			name, _ := f.s.channelOf(m.Channel)
			switch {
			case (m.Kind == "subscribe" || m.Kind == "ssubscribe") && f.wanted(name):
				f.back()
				f.handle(name, nil)
			case m.Kind == "sunsubscribe" && f.wanted(name):
				// Not asked: the channel's slot moved to another
				// primary (a failover, a resharding).
				f.failed(c, errors.New("Redis moved channel "+name+" to another node"))
				return
			}
		case *redis.Message:
			if name, _ := f.s.channelOf(m.Channel); f.wanted(name) {
				f.handle(name, f.decode(name, m.Payload))
			}
		}
	}
}

// back notes a subscription made: after a failure, that the feed is back.
func (f *feed) back() {
	f.mu.Lock()
	was := f.broken
	f.broken, f.retry = false, 0
	f.mu.Unlock()
	if was {
		f.s.log.Info("the Redis pub/sub connection is back", "redis", f.s.where)
	}
}

// wanted reports whether channel is watched now: Redis goes on sending a
// channel's messages until it has read the UNSUBSCRIBE, and a channel
// unwatched is not reported any more.
func (f *feed) wanted(channel string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.want[channel]
}

// decode returns the delivery a feed message carries: "<id> <record>"; nil
// (read it from the stream) for "<id>" alone or a message that does not
// decode.
func (f *feed) decode(channel, payload string) *relay.Entry {
	idText, rec, ok := strings.Cut(payload, " ")
	if !ok {
		return nil
	}
	d, err := decodeStreamRecord(idText+"-0", rec, "")
	if err != nil {
		f.s.log.Warn("an unreadable delivery on the Redis feed; reading it from the stream", "channel", channel, "err", err)
		return nil
	}
	return d
}
