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
// It owns one pub/sub connection, which go-redis reopens and resubscribes
// after a failure; each (re)subscription is reported too, as handle(name,
// nil), so that the Server reads what it may have missed from the stream.
type feed struct {
	s      *Store
	handle func(channel string, d *relay.Entry)

	psMu sync.Mutex // held while ps is used by reconcile, and to replace it
	ps   *redis.PubSub

	mu         sync.Mutex
	want       map[string]bool // channels to watch
	subscribed map[string]bool // channels asked of ps

	wake chan struct{} // capacity 1: want changed
	done chan struct{}
	wg   sync.WaitGroup
}

// StartFeed starts reporting deliveries of watched channels to handle (see
// relay.SharedStore).
func (s *Store) StartFeed(handle func(channel string, d *relay.Entry)) {
	f := &feed{
		s:          s,
		handle:     handle,
		ps:         s.rdb.Subscribe(s.ctx),
		want:       map[string]bool{},
		subscribed: map[string]bool{},
		wake:       make(chan struct{}, 1),
		done:       make(chan struct{}),
	}
	s.mu.Lock()
	s.feed = f
	s.mu.Unlock()
	f.wg.Add(2)
	go f.receive()
	go f.reconcile()
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
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// stop ends the feed's goroutines.
func (f *feed) stop() {
	close(f.done)
	f.s.cancel() // ends calls to Redis in progress
	f.psMu.Lock()
	f.ps.Close() // ends a blocked receive
	f.psMu.Unlock()
	f.wg.Wait()
}

// reconcile subscribes and unsubscribes as want changes, and keeps the
// presence keys of the watched channels alive.
func (f *feed) reconcile() {
	defer f.wg.Done()
	refresh := time.NewTicker(presenceTTL / 3)
	defer refresh.Stop()
	for {
		var all bool
		select {
		case <-f.done:
			return
		case <-f.wake:
		case <-refresh.C:
			all = true
		}
		f.mu.Lock()
		var add, del, present []string
		for c := range f.want {
			if !f.subscribed[c] {
				add = append(add, c)
				f.subscribed[c] = true
			}
			if all {
				present = append(present, c)
			}
		}
		for c := range f.subscribed {
			if !f.want[c] {
				del = append(del, c)
				delete(f.subscribed, c)
			}
		}
		f.mu.Unlock()
		if !all {
			present = add
		}
		f.psMu.Lock()
		// go-redis keeps the channels of a failed SUBSCRIBE and subscribes
		// again once it reconnects: errors here only delay.
		if len(add) > 0 {
			f.ps.Subscribe(f.s.ctx, f.feedChannels(add)...)
		}
		if len(del) > 0 {
			f.ps.Unsubscribe(f.s.ctx, f.feedChannels(del)...)
		}
		f.psMu.Unlock()
		f.markPresent(present)
	}
}

func (f *feed) feedChannels(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = f.s.feedChannel(n)
	}
	return out
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

// receive reads the pub/sub connection and reports what it gets, until
// stop.
func (f *feed) receive() {
	defer f.wg.Done()
	prefix := f.s.prefix + "feed:"
	backoff := 50 * time.Millisecond
	pinged, broken := false, false
	for {
		f.psMu.Lock()
		ps := f.ps
		f.psMu.Unlock()
		msg, err := ps.ReceiveTimeout(f.s.ctx, feedTimeout)
		select {
		case <-f.done:
			return
		default:
		}
		if err != nil {
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout() && !pinged:
				pinged = true
				ps.Ping(f.s.ctx)
				continue
			case errors.As(err, &ne) && ne.Timeout():
				f.s.log.Warn("Redis pub/sub did not answer a ping; reconnecting", "redis", f.s.where)
				f.replace()
				pinged = false
				continue
			}
			if !broken {
				broken = true
				f.s.log.Warn("lost the Redis pub/sub connection; streams stay open and catch up when it is back", "redis", f.s.where, "err", err)
			}
			select {
			case <-f.done:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		pinged = false
		backoff = 50 * time.Millisecond
		if broken {
			broken = false
			f.s.log.Info("the Redis pub/sub connection is back", "redis", f.s.where)
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if name := strings.TrimPrefix(m.Channel, prefix); m.Kind == "subscribe" && f.wanted(name) {
				f.handle(name, nil)
			}
		case *redis.Message:
			if name := strings.TrimPrefix(m.Channel, prefix); f.wanted(name) {
				f.handle(name, f.decode(name, m.Payload))
			}
		}
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

// replace closes the pub/sub connection and opens another with the same
// subscriptions.
func (f *feed) replace() {
	f.mu.Lock()
	names := make([]string, 0, len(f.subscribed))
	for c := range f.subscribed {
		names = append(names, c)
	}
	f.mu.Unlock()
	f.psMu.Lock()
	defer f.psMu.Unlock()
	f.ps.Close()
	f.ps = f.s.rdb.Subscribe(f.s.ctx, f.feedChannels(names)...)
}
