package relay

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hookline/hookline/internal/httpx"
	"github.com/hookline/hookline/internal/wire"
)

// streamFormat is the shape of a stream's messages and control events.
type streamFormat int

const (
	formatSmee     streamFormat = iota // smee.io's: headers, body, query, timestamp
	formatHookline                     // hookline's: the exact body, in body (JSON), bodyB or bodyLink (wire.StreamHeader)
	formatGosmee                       // a gosmee server's, on /events/<channel>
)

func (f streamFormat) String() string {
	return [...]string{"smee", "hookline", "gosmee"}[f]
}

// hookline reports whether f is hookline's format.
func (f streamFormat) hookline() bool { return f == formatHookline }

// requestedFormat is the format a GET /<channel> stream asked for: hookline's
// with wire.StreamHeader or wire.StreamQuery (what the page's EventSource
// uses, as it cannot set headers) set to 1 or true.
func requestedFormat(r *http.Request) streamFormat {
	if truthy(r.URL.Query().Get(wire.StreamQuery)) || truthy(r.Header.Get(wire.StreamHeader)) {
		return formatHookline
	}
	return formatSmee
}

// truthy reports whether a query parameter or header turns an option on:
// "1" or "true".
func truthy(v string) bool { return v == "1" || v == "true" }

// lastEventID returns the client's Last-Event-ID and whether it sent one.
// An empty value counts as none, as for EventSource, which never sends one.
func lastEventID(r *http.Request) (string, bool) {
	if v := strings.TrimSpace(r.Header.Get("Last-Event-ID")); v != "" {
		return v, true
	}
	if v := strings.TrimSpace(r.URL.Query().Get(wire.LastEventIDQuery)); v != "" {
		return v, true
	}
	return "", false
}

var errCutOff = errors.New("relay: subscriber cut off")

// serveStream serves GET /<name> (or, for gosmee's client, GET
// /events/<name>) as an event stream: ready, then the gap and replay after
// Last-Event-ID, then live deliveries and pings until the client leaves,
// the subscriber is cut off, or the relay closes.
//
// Once the response's head is out, an HTTP/1.1 stream takes its connection
// from net/http (see hijack) and is served by a goroutine of its own, so
// that an idle subscriber holds neither net/http's buffers (10 KiB) nor its
// connection goroutine's stack; elsewhere (HTTP/2, HTTP/1.0) the handler
// serves it through the ResponseWriter. Both run the same stream.run.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, name string, format streamFormat) {
	ip := s.clientIP(r)
	leave, err := s.admit(ip)
	if err != nil {
		s.refusedStreams.Add(1)
		s.log.Warn("stream refused", "channel", name, "client", ip, "err", err)
		w.Header().Set("Retry-After", "30")
		httpx.WriteError(w, http.StatusServiceUnavailable, strings.TrimPrefix(err.Error(), "relay: ")+"; retry later")
		return
	}
	rc := http.NewResponseController(w)
	out := responseOut{w: w, rc: rc}
	sub := &subscriber{
		ip:     ip,
		format: format,
		notify: make(chan struct{}, 1),
		kicked: make(chan struct{}),
		since:  time.Now(),
		pins:   s.pinned,
		out:    out,
	}
	if format.hookline() {
		sub.token = newChannelName() // 128 random bits: names its links
	}
	last, resume := lastEventID(r)

	c, rp, err := s.join(r.Context(), name, sub, last, resume)
	switch {
	case errors.Is(err, errClosing):
		leave()
		w.Header().Set("Retry-After", "5")
		httpx.WriteError(w, http.StatusServiceUnavailable, "the relay is shutting down; reconnect in a moment")
		return
	case err != nil:
		leave()
		s.storeFailed(w, "stream's replay", name, err)
		return
	}
	s.log.Info("subscriber connected", "channel", name, "format", sub.format, "lastEventId", last, "replayTo", rp.end)
	if len(name) < GuessableNameLength {
		s.log.Warn("short channel name: anyone who guesses it reads its deliveries and posts to it; GET /new makes a 22-character one", "channel", name)
	}
	st := &stream{s: s, c: c, sub: sub, rp: rp, leave: leave}

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("X-Content-Type-Options", "nosniff")
	if r.ProtoMajor == 1 {
		// The connection ends with the stream (a hijacked one is closed
		// then): a client must not pool it for another request.
		h.Set("Connection", "close")
	}
	// A stream outlives the server's read timeout; writes get their own
	// deadlines below.
	rc.SetReadDeadline(time.Time{})
	rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
	w.WriteHeader(http.StatusOK)
	// The ready event goes out with the response's head, in one write: a
	// client that counts itself connected on the head has the ready
	// event's last id too, which it resumes after if the connection drops
	// before its first delivery.
	ready := wire.Ready{Last: rp.end}.Frame()
	if format == formatGosmee {
		ready = append(slices.Clip(wire.GosmeeConnectedFrame), wire.GosmeeReadyFrame...)
	}
	w.Write(ready)
	if conn := s.hijack(r, rc); conn != nil {
		ctx, cancel := context.WithCancel(context.Background())
		co := &connOut{conn: conn, raw: rawOf(conn)}
		sub.setOut(co)
		go watch(conn, cancel)
		go func() {
			defer s.hijacked.Done()
			err := st.run(ctx, co)
			co.end(!errors.Is(err, errCutOff), s.opts.WriteTimeout)
			cancel()
		}()
		return
	}
	rc.SetWriteDeadline(time.Time{})
	st.run(r.Context(), out)
}

// hijack takes r's connection from net/http once the response's head (with
// chunked transfer encoding, as net/http sends a streamed HTTP/1.1
// response) is out, and returns it; or nil where a stream stays with
// net/http: HTTP/2 (which cannot be hijacked), HTTP/1.0 (no chunks), HEAD
// (no body), a ResponseWriter wrapped without Unwrap.
//
// A stream it returns counts in s.hijacked, for Serve's shutdown: added
// under s.mu, and never once the relay is closed (the stream then stays
// with net/http, whose Shutdown waits for it), so that waitStreams, which
// runs after Close, sees every one.
func (s *Server) hijack(r *http.Request, rc *http.ResponseController) net.Conn {
	if r.Method != http.MethodGet || r.ProtoMajor != 1 || r.ProtoMinor < 1 {
		return nil
	}
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.hijacked.Add(1)
	}
	s.mu.Unlock()
	if closed {
		return nil
	}
	conn, err := net.Conn(nil), rc.Flush()
	if err == nil {
		conn, _, err = rc.Hijack()
	}
	if err != nil {
		s.hijacked.Done()
		return nil
	}
	return conn
}

// watch cancels a hijacked stream once its connection ends, or its client
// sends anything: a stream's client has nothing to say, and one that talks
// (a second request, bytes from an attacker) is not read at the relay's
// expense.
func watch(conn net.Conn, cancel context.CancelFunc) {
	var b [1]byte
	conn.Read(b[:])
	cancel()
}

// stream is one subscriber's stream being served.
type stream struct {
	s     *Server
	c     *channel
	sub   *subscriber
	rp    *replay
	leave func() // admit's
}

// run writes the stream to out until ctx ends (the client left), the
// subscriber is cut off (errCutOff) or the relay closes (errClosing), or
// a write fails; it returns why.
func (st *stream) run(ctx context.Context, out streamOut) (err error) {
	s, c, sub, rp := st.s, st.c, st.sub, st.rp
	defer st.leave()
	defer func() {
		s.leave(c, sub)
		sub.mu.Lock()
		sub.done = true
		sub.mu.Unlock()
		for _, d := range append(sub.take(nil), sub.unlinkAll()...) {
			sub.release(d)
		}
	}()

	lw := &liveWriter{sw: streamWriter{out: out, sent: &s.sent, sub: sub, timeout: s.opts.WriteTimeout}}
	if co, ok := out.(*connOut); ok && co.raw != nil {
		lw.co = co
	}
	sw := &lw.sw
	if sub.token != "" {
		sw.linkBase = c.name + "/body/"
	}
	// This goroutine holds lw.mu but while it waits for news below: a
	// publisher writes in its place only then (liveWriter.write), never
	// before the replay is out, nor after the stream ends.
	lw.mu.Lock()
	sub.live.Store(lw)
	// The ready event is written (see serveStream).
	for err == nil {
		gap, page, done, rerr := rp.next(ctx)
		if done || rerr != nil {
			err = rerr // the client resumes from what it got
			break
		}
		for _, d := range page {
			sub.hold(d)
		}
		if gap != nil && sub.format == formatGosmee {
			err = sw.write(wire.GosmeeGapFrame(*gap))
		} else if gap != nil {
			err = sw.write(gap.Frame())
		}
		err = sw.deliveries(page, err)
	}
	if err == nil {
		err = out.Flush()
	}

	ping := time.NewTicker(s.opts.PingInterval)
	defer ping.Stop()
	touched := time.Now() // the reader's use of a private channel, recorded by authorize
	for err == nil {
		lw.mu.Unlock()
		select {
		case <-sub.notify:
			lw.mu.Lock()
			if err = lw.resume(); err == nil {
				err = lw.send()
			}
			ping.Reset(s.opts.PingInterval)
		case <-ping.C:
			lw.mu.Lock()
			frame := wire.PingFrame
			if sub.format == formatGosmee {
				frame = wire.GosmeeKeepaliveFrame
			}
			if err = lw.resume(); err == nil {
				err = sw.write(frame)
			}
			if err == nil {
				err = out.Flush()
			}
			if IsPrivateName(c.name) {
				touched = s.touch(ctx, c.name, touched)
			}
		case <-sub.kicked:
			lw.mu.Lock()
			err = errCutOff
		case <-ctx.Done():
			lw.mu.Lock()
			err = ctx.Err()
		case <-s.closing:
			lw.mu.Lock()
			// What was queued before Close goes out before the end.
			if err = lw.resume(); err == nil {
				err = lw.send()
			}
			if err == nil {
				err = errClosing
			}
		}
	}
	// lw.mu stays locked: no publisher writes to the stream from here.
	select {
	case <-sub.kicked:
		// Make sure the connection of a cut-off subscriber closes: its
		// response must not complete (a write may have pushed the deadline
		// cut set back into the future).
		out.SetWriteDeadline(time.Now())
		err = errCutOff
	default:
		// Leave no stale deadline on a connection that may serve more
		// requests.
		out.SetWriteDeadline(time.Time{})
	}
	s.log.Info("subscriber disconnected", "channel", c.name, "reason", err.Error())
	return err
}

// streamOut is where a stream's events go: net/http's ResponseWriter
// (responseOut), or the connection itself (connOut).
type streamOut interface {
	io.Writer
	Flush() error
	SetWriteDeadline(time.Time) error
}

// responseOut writes a stream through net/http's ResponseWriter.
type responseOut struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (o responseOut) Write(b []byte) (int, error) { return o.w.Write(b) }

func (o responseOut) Flush() error {
	err := o.rc.Flush()
	if errors.Is(err, http.ErrNotSupported) {
		return nil
	}
	return err
}

func (o responseOut) SetWriteDeadline(t time.Time) error { return o.rc.SetWriteDeadline(t) }

// connOut writes a stream's chunks on its hijacked connection. It holds a
// buffer (from outBuffers) only from a write to the next Flush: between
// events, a stream costs its connection and little else.
//
// What is written up to a Flush goes out as one HTTP/1.1 chunk in one
// write system call, whatever the connection is: the buffer keeps room for
// the chunk's size line before the data and its CRLF after. (A bufio.Writer
// over a chunk writer made three writes of each chunk on the relay's
// connections, which are wrapped (countedConn), so that net.Buffers could
// not use writev: each write a loopback segment that woke the client.)
//
// A publisher may write in place of the stream's goroutine while it waits
// (liveWriter.write): then quick is set, and each chunk goes to the socket
// without waiting for room (writeNow): what the socket does not take at
// once is kept in rest, a copy, which the goroutine writes first when it
// wakes (liveWriter.resume).
type connOut struct {
	conn  net.Conn
	buf   *[]byte         // nil between events: chunkRoom bytes, then the data
	raw   syscall.RawConn // conn's socket, for quick writes; nil: none
	quick bool
	rest  []byte
}

// chunkRoom is the room kept for a chunk's size line: up to 16 hex
// digits and CRLF.
const chunkRoom = 18

// outBuffers hold 64 KiB: an event of a webhook of up to about 45 KiB (its
// body in base64), or several queued ones, go out as one chunk in one
// write system call. With 4 KiB a 4 KiB webhook took six (the base64
// encoder writes 1 KiB at a time), each a chunk the client parses.
var outBuffers = sync.Pool{New: func() any {
	b := make([]byte, chunkRoom, 64<<10)
	return &b
}}

var crlf = []byte("\r\n")

func (o *connOut) Write(b []byte) (int, error) {
	if o.buf == nil {
		o.buf = outBuffers.Get().(*[]byte)
	}
	if len(*o.buf)+len(b)+len(crlf) > cap(*o.buf) {
		if err := o.writeChunk(); err != nil {
			return 0, err
		}
		if chunkRoom+len(b)+len(crlf) > cap(*o.buf) {
			// Larger than a buffer: a chunk of its own, in a buffer of
			// its size.
			big := append(make([]byte, chunkRoom, chunkRoom+len(b)+len(crlf)), b...)
			if err := o.sendChunk(big); err != nil {
				return 0, err
			}
			return len(b), nil
		}
	}
	*o.buf = append(*o.buf, b...)
	return len(b), nil
}

// writeChunk writes what the buffer holds as one chunk and empties it.
func (o *connOut) writeChunk() error {
	b := *o.buf
	*o.buf = b[:chunkRoom]
	if len(b) == chunkRoom {
		return nil
	}
	return o.sendChunk(b)
}

// sendChunk writes b[chunkRoom:] to the connection as one HTTP/1.1 chunk
// in one write: its size line goes in the room before the data, its CRLF
// after (b has the capacity for it).
func (o *connOut) sendChunk(b []byte) error {
	var size [chunkRoom]byte
	line := append(strconv.AppendInt(size[:0], int64(len(b)-chunkRoom), 16), crlf...)
	start := chunkRoom - len(line)
	copy(b[start:], line)
	b = append(b, crlf...)[start:]
	if !o.quick {
		_, err := o.conn.Write(b)
		return err
	}
	if len(o.rest) == 0 {
		n, err := writeNow(o.raw, b)
		if err != nil {
			return err
		}
		b = b[n:]
	}
	o.rest = append(o.rest, b...)
	return nil
}

func (o *connOut) Flush() error {
	if o.buf == nil {
		return nil
	}
	err := o.writeChunk()
	outBuffers.Put(o.buf)
	o.buf = nil
	return err
}

func (o *connOut) SetWriteDeadline(t time.Time) error { return o.conn.SetWriteDeadline(t) }

// end ends the response with its last chunk when complete (else the client
// sees it broken off, as a cut-off subscriber must), and closes the
// connection.
func (o *connOut) end(complete bool, timeout time.Duration) {
	if complete && len(o.rest) == 0 { // else an event is cut short: so is the response
		o.conn.SetWriteDeadline(time.Now().Add(timeout))
		io.WriteString(o.conn, "0\r\n\r\n")
	}
	o.conn.Close()
}

// liveWriter writes a stream's live deliveries. Its goroutine writes
// them when woken (subscriber.notify); while it waits, a publisher writes
// them itself (write, see Server.publish): a delivery reaches an idle
// subscriber from the POST's own goroutine, before the POST is answered,
// and no goroutine is woken, nor the idle processor it would run on.
type liveWriter struct {
	// mu is held by whoever writes: the stream's goroutine, except while
	// it waits for news, or a publisher in its place.
	mu    sync.Mutex
	sw    streamWriter
	co    *connOut     // where a publisher writes; nil: only the goroutine writes
	batch []*Entry     // the deliveries being written
	err   error        // a publisher's write failed: the stream ends with it
	last  atomic.Int64 // when deliveries were last written (since epoch), read without mu
}

// quietGap is how long a stream must have had no delivery for a publisher
// to write the next (liveWriter.write): at a user's rate it saves the
// hand-off; deliveries that come closer together go to the stream's
// goroutine, which writes all that wait in one chunk (in order, 8 POSTs
// in flight: 14 % fewer deliveries a second when each POST wrote its own).
// The forwarder tells a quiet stream the same way (proxy's quietGap).
// Tests set it (SetQuietGap).
var quietGap atomic.Int64

func init() { quietGap.Store(int64(2 * time.Millisecond)) }

// epoch is what liveWriter.last counts from (the monotonic clock).
var epoch = time.Now()

// quickMax bounds the bytes of deliveries a publisher writes for a stream
// (liveWriter.write), and so what connOut.rest may copy: more are left to
// the stream's goroutine. A webhook is rarely larger.
const quickMax = 32 << 10

// send writes the deliveries waiting for the subscriber. The caller holds
// mu.
func (lw *liveWriter) send() error {
	lw.batch = lw.sw.sub.take(lw.batch)
	if len(lw.batch) > 0 {
		lw.last.Store(int64(time.Since(epoch)))
	}
	err := lw.sw.deliveries(lw.batch, nil)
	clear(lw.batch) // hold no delivery longer than needed
	if err == nil {
		err = lw.sw.out.Flush()
	}
	return err
}

// write writes the deliveries waiting for the subscriber from the
// caller's goroutine if the stream was quiet (quietGap) and its goroutine
// waits for news (else that goroutine is writing), and reports whether
// nothing is left for the goroutine: else the caller wakes it. The socket
// is written without waiting for room: a subscriber that does not read
// never holds up a POST; what the socket did not take is written by the
// goroutine (rest).
func (lw *liveWriter) write() bool {
	if lw.co == nil || time.Since(epoch)-time.Duration(lw.last.Load()) < time.Duration(quietGap.Load()) || !lw.mu.TryLock() {
		return false // a busy stream's POSTs leave its goroutine's lock alone
	}
	defer lw.mu.Unlock()
	if lw.err != nil || len(lw.co.rest) > 0 || lw.sw.sub.waiting() > quickMax {
		return false
	}
	lw.co.quick = true
	err := lw.send()
	lw.co.quick = false
	if err != nil {
		lw.err = err
		return false
	}
	return len(lw.co.rest) == 0
}

// resume is the goroutine's first step once woken, holding mu: it ends
// the stream if a publisher's write failed, and writes what one left.
func (lw *liveWriter) resume() error {
	if lw.err != nil {
		return lw.err
	}
	if lw.co == nil || len(lw.co.rest) == 0 {
		return nil
	}
	rest := lw.co.rest // framed: the end of a chunk, and any after it
	lw.co.rest = nil
	if err := lw.sw.arm(len(rest)); err != nil {
		return err
	}
	_, err := lw.co.conn.Write(rest)
	return err
}

var errClosing = errors.New("relay: closing")

// streamWriter writes events to one subscriber with a deadline per event.
type streamWriter struct {
	out      streamOut
	sent     *atomic.Int64 // Server.sent: deliveries written to streams
	sub      *subscriber
	linkBase string // "<channel>/body/" when the stream takes large bodies by link
	timeout  time.Duration
}

// arm sets the deadline for writing n bytes and reports errCutOff once the
// subscriber is cut off. The check comes after the deadline is set, so that
// a cut-off between the two (which sets the deadline to now) cannot be
// overwritten unnoticed.
func (sw *streamWriter) arm(n int) error {
	d := sw.timeout + time.Duration(n>>20)*time.Second
	sw.out.SetWriteDeadline(time.Now().Add(d)) // ErrNotSupported: no deadline
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
	_, err := sw.out.Write(b)
	return err
}

// deliveries writes page unless err is set (the stream has failed), and
// returns the first error. The subscriber holds each delivery (see
// subscriber.hold) until it is written: page is a queue taken from it, or
// a replay page it holds meanwhile.
func (sw *streamWriter) deliveries(page []*Entry, err error) error {
	for _, d := range page {
		linked := false
		if err == nil {
			if linked, err = sw.delivery(d); err == nil {
				sw.sent.Add(1)
			}
		}
		if !linked {
			sw.sub.release(d)
		}
	}
	return err
}

// delivery writes d, and reports whether it wrote its body by link: the
// subscriber then keeps d for the fetch (see subscriber.link), from before
// the link can reach the client until a later fetch or the stream's end.
func (sw *streamWriter) delivery(d *Entry) (linked bool, err error) {
	frame := d.frame(sw.sub.format)
	if sw.linkBase != "" && len(d.body) >= wire.LinkMin {
		linked = true
		sw.sub.link(d)
		frame = d.hookline.Linked(sw.linkBase + strconv.FormatInt(d.id, 10) + "?s=" + sw.sub.token)
	}
	if err := sw.arm(frame.Len()); err != nil {
		return linked, err
	}
	b := make([]byte, 0, 32)
	b = append(b, "id: "...)
	if sw.sub.format == formatGosmee {
		b = append(b, wire.GosmeeID(d.id)...) // the shape gosmee's client resends
	} else {
		b = strconv.AppendInt(b, d.id, 10)
	}
	b = append(b, '\n')
	if _, err := sw.out.Write(b); err != nil {
		return linked, err
	}
	_, err = frame.WriteTo(sw.out)
	return linked, err
}

// serveBody answers GET /<name>/body/<id>?s=<token>: the exact bytes of a
// delivery that the stream named by token sent by link (wire.StreamHeader),
// held for it while that stream lasts and until a later link of it is
// fetched; after that, from the channel's history while it retains the
// delivery (a client whose stream ended before its fetch still gets it).
// Anything else is a 404 saying where the delivery may still be.
func (s *Server) serveBody(w http.ResponseWriter, r *http.Request, name, idText string) {
	var sub *subscriber
	var d *Entry
	id, err := strconv.ParseInt(idText, 10, 64)
	if token := r.URL.Query().Get("s"); err == nil && token != "" {
		s.mu.Lock()
		c := s.channels[name]
		s.mu.Unlock()
		if c != nil {
			c.mu.Lock()
			sub = c.linkers[token]
			c.mu.Unlock()
		}
	}
	if sub != nil {
		var before []*Entry
		d, before = sub.fetch(id)
		for _, o := range before {
			sub.release(o)
		}
	}
	if d == nil && err == nil {
		var gerr error
		if d, gerr = s.store.Get(r.Context(), name, id); gerr != nil {
			s.log.Error("history store failed", "channel", name, "err", gerr)
			w.Header().Set("Retry-After", "1")
			httpx.WriteError(w, http.StatusServiceUnavailable, "the relay cannot read the channel's history now; fetch again in a moment")
			return
		}
	}
	if d == nil {
		httpx.WriteError(w, http.StatusNotFound, "no body at this link: the channel's history no longer has the delivery")
		return
	}
	// The bodies being fetched count in what the relay holds, together
	// with those only streams hold (Server.pinned): both stay within
	// Options.TotalHistoryBytes, beyond which a fetch waits for room (503;
	// the client fetches again, or resumes), so the relay's memory bound
	// holds (MemoryBound). Concurrent fetches of one delivery share one
	// copy (a shared store decodes a fresh one for each read).
	d, done := s.fetching(name+"/"+idText, d)
	if d == nil {
		w.Header().Set("Retry-After", "5")
		httpx.WriteError(w, http.StatusServiceUnavailable, "the relay is sending as many bodies as it may; fetch again in a moment")
		return
	}
	defer done()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.Itoa(len(d.body)))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	// Each piece must leave within bodyWriteIdle: a client that stops
	// reading is cut in seconds, not after the whole body's allowance.
	rc := http.NewResponseController(w)
	for off := 0; off < len(d.body); off += bodyWriteChunk {
		rc.SetWriteDeadline(time.Now().Add(bodyWriteIdle))
		if _, err := w.Write(d.body[off:min(off+bodyWriteChunk, len(d.body))]); err != nil {
			return // kept for a fetch made again
		}
	}
	if sub != nil {
		// Written whole: still kept for a fetch made again, but shed lets
		// it go before cutting any stream, so that a forwarder is not the
		// one cut for a body it already has.
		sub.fetchedWhole(id)
	}
}

// A body sent by link is written bodyWriteChunk at a time, each within
// bodyWriteIdle (25.6 KiB/s at the least).
const (
	bodyWriteChunk = 256 << 10
	bodyWriteIdle  = 10 * time.Second
)

// fetching returns the delivery to write for a body fetch of key
// (channel/id): d, or the one a fetch in flight of the same key already
// writes, and a func to call when done; nil when a new body would take the
// bodies being fetched, with Server.pinned, past Options.TotalHistoryBytes
// (one body is always let through).
func (s *Server) fetching(key string, d *Entry) (*Entry, func()) {
	s.fetchMu.Lock()
	defer s.fetchMu.Unlock()
	f := s.fetches[key]
	if f == nil {
		if s.fetchBytes > 0 && s.fetchBytes+s.pinned.Load()+d.size > s.opts.TotalHistoryBytes {
			return nil, nil
		}
		f = &fetch{d: d}
		s.fetches[key] = f
		s.fetchBytes += d.size
	}
	f.n++
	return f.d, func() {
		s.fetchMu.Lock()
		defer s.fetchMu.Unlock()
		if f.n--; f.n == 0 {
			delete(s.fetches, key)
			s.fetchBytes -= f.d.size
		}
	}
}

// fetchedBytes returns the size of the bodies being written to fetches.
func (s *Server) fetchedBytes() int64 {
	s.fetchMu.Lock()
	defer s.fetchMu.Unlock()
	return s.fetchBytes
}

// fetch is a body being written to the fetches of one link.
type fetch struct {
	d *Entry
	n int
}
