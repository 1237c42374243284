package relay

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/internal/wire"
)

// StreamQuery and StreamHeader opt a stream into hookline's extended
// messages (with bodyB): GET /<channel>?hookline=1 (what the page's
// EventSource uses, as it cannot set headers) or the header
// X-Hookline-Stream: 1. LastEventIDQuery stands in for the Last-Event-ID
// header on a first connection, for clients (such as a browser's
// EventSource) that cannot send it: ?lastEventId=0 replays the whole
// history. The header wins when both are present, so an EventSource's
// automatic reconnections resume where they stopped.
const (
	StreamQuery      = wire.StreamQuery
	StreamHeader     = wire.StreamHeader
	LastEventIDQuery = wire.LastEventIDQuery
)

// streamFormat is the shape of a stream's messages and control events.
type streamFormat int

const (
	formatSmee     streamFormat = iota // smee.io's: headers, body, query, timestamp
	formatExtended                     // hookline's: smee.io's plus bodyB
	formatGosmee                       // a gosmee server's, on /events/<channel>
	formatLean                         // hookline's without body: bodyB carries it
)

func (f streamFormat) String() string {
	return [...]string{"smee", "hookline", "gosmee", "lean"}[f]
}

// requestedFormat is the format a GET /<channel> stream asked for.
func requestedFormat(r *http.Request) streamFormat {
	switch {
	case !wantsExtended(r):
		return formatSmee
	case r.Header.Get(wire.LeanHeader) == "1":
		return formatLean
	}
	return formatExtended
}

// wantsExtended reports whether the stream asked for hookline's messages.
func wantsExtended(r *http.Request) bool {
	truthy := func(v string) bool { return v == "1" || v == "true" }
	return truthy(r.URL.Query().Get(StreamQuery)) || truthy(r.Header.Get(StreamHeader))
}

// lastEventID returns the client's Last-Event-ID and whether it sent one.
// An empty value counts as none, as for EventSource, which never sends one.
func lastEventID(r *http.Request) (string, bool) {
	if v := strings.TrimSpace(r.Header.Get("Last-Event-ID")); v != "" {
		return v, true
	}
	if v := strings.TrimSpace(r.URL.Query().Get(LastEventIDQuery)); v != "" {
		return v, true
	}
	return "", false
}

var errCutOff = errors.New("relay: subscriber cut off")

// serveStream serves GET /<name> (or, for gosmee's client, GET
// /events/<name>) as an event stream: ready, then the gap and replay after
// Last-Event-ID, then live deliveries and pings until the client leaves,
// the subscriber is cut off, or the relay closes.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, name string, format streamFormat) {
	ip := s.clientIP(r)
	leave, err := s.admit(ip)
	if err != nil {
		s.log.Warn("stream refused", "channel", name, "client", ip, "err", err)
		w.Header().Set("Retry-After", "30")
		writeError(w, http.StatusServiceUnavailable, strings.TrimPrefix(err.Error(), "relay: ")+"; retry later")
		return
	}
	defer leave()
	rc := http.NewResponseController(w)
	sub := &subscriber{
		ip:     ip,
		format: format,
		notify: make(chan struct{}, 1),
		kicked: make(chan struct{}),
		pins:   s.pinned,
		rc:     rc,
	}
	last, resume := lastEventID(r)

	c, rp, err := s.join(r.Context(), name, sub, last, resume)
	switch {
	case errors.Is(err, errClosing):
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "the relay is shutting down; reconnect in a moment")
		return
	case err != nil:
		s.storeFailed(w, "stream's replay", name, err)
		return
	}
	s.log.Info("subscriber connected", "channel", name, "format", sub.format, "lastEventId", last, "replayTo", rp.end)
	if len(name) < GuessableNameLength {
		s.log.Warn("short channel name: anyone who guesses it reads its deliveries and posts to it; GET /new makes a 22-character one", "channel", name)
	}

	defer func() {
		s.leave(c, sub)
		sub.mu.Lock()
		sub.done = true
		sub.mu.Unlock()
		for _, d := range sub.take(nil) {
			sub.release(d)
		}
	}()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("X-Content-Type-Options", "nosniff")
	// A stream outlives the server's read timeout; writes get their own
	// deadlines below.
	rc.SetReadDeadline(time.Time{})
	rc.SetWriteDeadline(time.Time{})
	w.WriteHeader(http.StatusOK)

	sw := streamWriter{w: w, rc: rc, sub: sub, timeout: s.opts.WriteTimeout}
	if format == formatGosmee {
		err = sw.write(append(slices.Clip(wire.GosmeeConnectedFrame), wire.GosmeeReadyFrame...))
	} else {
		err = sw.write(wire.Ready{Last: rp.end}.Frame())
	}
	for err == nil {
		gap, page, done, rerr := rp.next(r.Context())
		if done || rerr != nil {
			err = rerr // the client resumes from what it got
			break
		}
		for _, d := range page {
			sub.hold(d)
		}
		if gap != nil && format == formatGosmee {
			err = sw.write(wire.GosmeeGapFrame(*gap))
		} else if gap != nil {
			err = sw.write(gap.Frame())
		}
		err = sw.deliveries(page, err)
	}
	if err == nil {
		err = sw.flush()
	}

	ping := time.NewTicker(s.opts.PingInterval)
	defer ping.Stop()
	var batch []*delivery
	// send writes the deliveries waiting for the subscriber.
	send := func() error {
		batch = sub.take(batch)
		err := sw.deliveries(batch, nil)
		clear(batch) // hold no delivery longer than needed
		if err == nil {
			err = sw.flush()
		}
		return err
	}
	for err == nil {
		select {
		case <-sub.notify:
			err = send()
			ping.Reset(s.opts.PingInterval)
		case <-ping.C:
			frame := wire.PingFrame
			if format == formatGosmee {
				frame = wire.GosmeeKeepaliveFrame
			}
			if err = sw.write(frame); err == nil {
				err = sw.flush()
			}
		case <-sub.kicked:
			err = errCutOff
		case <-r.Context().Done():
			err = r.Context().Err()
		case <-s.closing:
			// What was queued before Close goes out before the end.
			if err = send(); err == nil {
				err = errClosing
			}
		}
	}
	select {
	case <-sub.kicked:
		// Make sure the connection of a cut-off subscriber closes: its
		// response must not complete (a write may have pushed the deadline
		// cut set back into the future).
		rc.SetWriteDeadline(time.Now())
		err = errCutOff
	default:
		// Leave no stale deadline on a connection that may serve more
		// requests.
		rc.SetWriteDeadline(time.Time{})
	}
	s.log.Info("subscriber disconnected", "channel", name, "reason", err.Error())
}

var errClosing = errors.New("relay: closing")

// streamWriter writes events to one subscriber with a deadline per event.
type streamWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	sub     *subscriber
	timeout time.Duration
}

// arm sets the deadline for writing n bytes and reports errCutOff once the
// subscriber is cut off. The check comes after the deadline is set, so that
// a cut-off between the two (which sets the deadline to now) cannot be
// overwritten unnoticed.
func (sw *streamWriter) arm(n int) error {
	d := sw.timeout + time.Duration(n>>20)*time.Second
	sw.rc.SetWriteDeadline(time.Now().Add(d)) // ErrNotSupported: no deadline
	select {
	case <-sw.sub.kicked:
		return errCutOff
	default:
		return nil
	}
}

func (sw *streamWriter) write(b []byte) error {
	if err := sw.arm(len(b)); err != nil {
		return err
	}
	_, err := sw.w.Write(b)
	return err
}

// deliveries writes page unless err is set (the stream has failed), and
// returns the first error. The subscriber holds each delivery (see
// subscriber.hold) until it is written: page is a queue taken from it, or
// a replay page it holds meanwhile.
func (sw *streamWriter) deliveries(page []*delivery, err error) error {
	for _, d := range page {
		if err == nil {
			err = sw.delivery(d)
		}
		sw.sub.release(d)
	}
	return err
}

func (sw *streamWriter) delivery(d *delivery) error {
	frame := d.frame(sw.sub.format)
	if err := sw.arm(frame.Len()); err != nil {
		return err
	}
	b := make([]byte, 0, 32)
	b = append(b, "id: "...)
	b = strconv.AppendInt(b, d.id, 10)
	b = append(b, '\n')
	if _, err := sw.w.Write(b); err != nil {
		return err
	}
	_, err := frame.WriteTo(sw.w)
	return err
}

func (sw *streamWriter) flush() error {
	err := sw.rc.Flush()
	if errors.Is(err, http.ErrNotSupported) {
		return nil
	}
	return err
}
