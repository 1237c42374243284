package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hookline/hookline/internal/atomicfile"
	"github.com/hookline/hookline/internal/httpx"
	"github.com/hookline/hookline/internal/sse"
)

// stateVersion is the version of the state file format.
const stateVersion = 1

// maxStateFile bounds what a state file may hold: an id and a few hundred
// more (done_after is at most Concurrency+defaultQueueSize ids).
const maxStateFile = 4 << 20

// stateDoc is a state file:
//
//	{
//	  "version": 1,
//	  "channel": "https://relay.example/abc",   the stream URL, redacted
//	  "channel_sha256": "…",                    of the full stream URL
//	  "last_event_id": "41",                    everything up to it is done
//	  "done_after": ["43", "44"],               done, above last_event_id
//	  "lanes_done": {"45": ["worker"]},         with several targets: the
//	                                            targets done with a delivery
//	                                            others are still sending
//	  "updated_at": "2026-11-22T10:00:00Z"
//	}
type stateDoc struct {
	Version     int      `json:"version"`
	Channel     string   `json:"channel"`
	ChannelHash string   `json:"channel_sha256"`
	LastEventID string   `json:"last_event_id"`
	DoneAfter   []string `json:"done_after,omitempty"`
	// LanesDone: event id → the targets (Options.Targets) that have it,
	// for a delivery not every target has yet.
	LanesDone map[string][]string `json:"lanes_done,omitempty"`
	UpdatedAt time.Time           `json:"updated_at"`
}

// channelHash identifies a channel in a state file without storing its
// credentials.
func channelHash(streamURL string) string {
	sum := sha256.Sum256([]byte(streamURL))
	return hex.EncodeToString(sum[:])
}

// errStateOtherChannel is readState's error for a file written for another
// channel.
var errStateOtherChannel = errors.New("the state file belongs to another channel")

// readState reads a state file written for streamURL. A missing file is no
// state and no error.
func readState(path, streamURL string) (stateDoc, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return stateDoc{}, nil
	}
	if err != nil {
		return stateDoc{}, err
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, maxStateFile+1)); err != nil {
		return stateDoc{}, err
	}
	if buf.Len() > maxStateFile {
		return stateDoc{}, fmt.Errorf("%s: larger than %d bytes: not a hookline state file", path, maxStateFile)
	}
	doc, err := parseState(buf.Bytes())
	if err != nil {
		return stateDoc{}, fmt.Errorf("%s: %w", path, err)
	}
	if doc.ChannelHash != channelHash(streamURL) {
		return stateDoc{}, fmt.Errorf("%s: %w (%s)", path, errStateOtherChannel, doc.Channel)
	}
	return doc, nil
}

// parseState checks a state document: version 1, and ids that could be
// sent back as Last-Event-ID.
func parseState(data []byte) (stateDoc, error) {
	var doc stateDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return stateDoc{}, fmt.Errorf("not a hookline state file: %v", err)
	}
	if doc.Version != stateVersion {
		return stateDoc{}, fmt.Errorf("state file version %d (this hookline reads version %d)", doc.Version, stateVersion)
	}
	if !sse.UsableEventID(doc.LastEventID) {
		return stateDoc{}, errors.New("last_event_id is not a usable event id")
	}
	for _, id := range doc.DoneAfter {
		if id == "" || !sse.UsableEventID(id) {
			return stateDoc{}, errors.New("done_after holds an unusable event id")
		}
	}
	for id := range doc.LanesDone {
		if id == "" || !sse.UsableEventID(id) {
			return stateDoc{}, errors.New("lanes_done holds an unusable event id")
		}
	}
	return doc, nil
}

// syncDir makes a rename in dir durable where the system allows it (not on
// Windows, where a directory cannot be opened for syncing).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// checkpoint tracks which deliveries are done and stores the watermark: the
// event id of the latest delivery such that it and every delivery read
// before it are done. With one worker that is the last delivery done; with
// several, a slow delivery holds the watermark back while later ones finish,
// and those are listed in done_after so a restart skips them.
//
// Deliveries are numbered in the order they were read (seq from 0); ids are
// the relay's, compared only for equality, never parsed.
type checkpoint struct {
	path       string // "" when nothing is stored
	streamURL  string
	shownURL   string
	now        func() time.Time
	onWriteErr func(error) // called after a failed write; nil after a good one

	mu      sync.Mutex
	next    uint64                // the lowest seq not done
	done    map[uint64]string     // seqs done above next, with their event ids
	lanes   map[uint64]*lanesMark // seqs some targets are done with
	mark    string                // the watermark's event id
	version uint64                // bumped whenever mark or done changes

	writing  bool          // a writeLoop runs
	dirty    bool          // the state changed since writeLoop's last snapshot
	flushing int           // flush calls waiting: writeLoop writes without pausing
	wake     chan struct{} // ends writeLoop's pause (flush)
	idle     *sync.Cond    // on mu: broadcast when writeLoop ends

	wmu     sync.Mutex // serialises writes
	written uint64     // the version on disk

	interval time.Duration // writeLoop's pause: stateWriteInterval (a test seam)
}

func newCheckpoint(path, streamURL string, now func() time.Time, onWriteErr func(error)) *checkpoint {
	c := &checkpoint{
		path: path, streamURL: streamURL, shownURL: httpx.RedactURL(streamURL), now: now,
		onWriteErr: onWriteErr, done: map[uint64]string{}, lanes: map[uint64]*lanesMark{},
		wake: make(chan struct{}, 1), interval: stateWriteInterval,
	}
	c.idle = sync.NewCond(&c.mu)
	return c
}

// lanesMark is a delivery some targets are done with.
type lanesMark struct {
	id    string
	names []string
}

// laneDone records that target name is done with delivery seq (event id
// id) while others are not, and writes the state file.
func (c *checkpoint) laneDone(seq uint64, id, name string) {
	if c.path == "" {
		return // nothing is stored: nothing to remember
	}
	c.mu.Lock()
	m := c.lanes[seq]
	if m == nil {
		m = &lanesMark{id: id}
		c.lanes[seq] = m
	}
	m.names = append(m.names, name)
	c.version++
	c.scheduleLocked()
	c.mu.Unlock()
}

// start sets the watermark read from a state file.
func (c *checkpoint) start(mark string) {
	c.mu.Lock()
	c.mark = mark
	c.mu.Unlock()
}

// adopt makes id the watermark and stores it, when nothing is stored or
// done yet: a client's position before its first delivery.
func (c *checkpoint) adopt(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mark != "" || c.next > 0 || len(c.done) > 0 {
		return
	}
	c.mark = id
	c.version++
	if c.path != "" {
		c.scheduleLocked()
	}
}

// finish marks delivery seq (with event id id, maybe "") done and, when the
// watermark or the done list changed and store is true, writes the state
// file before returning.
func (c *checkpoint) finish(seq uint64, id string, store bool) {
	c.mu.Lock()
	c.done[seq] = id
	delete(c.lanes, seq)
	changed := false
	for {
		id, ok := c.done[c.next]
		if !ok {
			break
		}
		delete(c.done, c.next)
		c.next++
		if id != "" {
			c.mark = id
		}
		changed = true
	}
	if !changed && id != "" {
		changed = true // a new entry in done_after
	}
	if changed {
		c.version++
	}
	if store && changed && c.path != "" {
		c.scheduleLocked()
	}
	c.mu.Unlock()
}

// scheduleLocked has the state written soon, off the caller's path: a
// writeLoop writes the newest snapshot, then, while deliveries keep
// finishing, the newest again every stateWriteInterval, so that one write
// (and its fsync) covers all the deliveries a burst finishes meanwhile,
// and no delivery waits for a disk. The cost: a delivery whose state was
// not on disk yet when the process died (at most stateWriteInterval's
// worth) is received again on restart, as one in flight is. flush waits
// for what is left. Called with c.mu held.
func (c *checkpoint) scheduleLocked() {
	c.dirty = true
	if !c.writing {
		c.writing = true
		go c.writeLoop()
	}
}

// stateWriteInterval spaces the state file's writes while deliveries keep
// finishing: a steady stream costs one write every five seconds, not one
// per delivery. Each write is a new file and a rename (and an fsync):
// 0.4 to 1.2 ms of CPU on a VM's ext4, more than the rest of a delivery's
// work, so the interval must be longer than the time between deliveries
// at the rates webhooks come: at one a second and an interval of a second,
// every delivery still had its own write, and forward spent 2.5 times the
// CPU of a forwarder without a state file (cmd/hookline-bench,
// docs/PERFORMANCE.md). The first change after a quiet spell is written at
// once. Five seconds is what a crash may deliver again (Ctrl-C and
// SIGTERM write the position first): Kafka's consumers commit their
// position every 5 s by default, the same trade.
const stateWriteInterval = 5 * time.Second

// writeLoop writes the newest snapshot, pauses stateWriteInterval (what
// finishes meanwhile shares the next write; a flush ends the pause), and
// again while the state changed; then ends.
func (c *checkpoint) writeLoop() {
	pause := time.NewTimer(c.interval)
	defer pause.Stop()
	c.mu.Lock()
	for c.dirty {
		c.dirty = false
		doc, version := c.snapshotLocked()
		c.mu.Unlock()
		c.write(doc, version)
		c.mu.Lock()
		if c.flushing == 0 {
			c.mu.Unlock()
			pause.Reset(c.interval)
			select {
			case <-pause.C:
			case <-c.wake:
			}
			c.mu.Lock()
		}
	}
	c.writing = false
	c.idle.Broadcast()
	c.mu.Unlock()
}

// flush writes what changed without waiting for writeLoop's pause and
// returns once every write scheduled is done (Run's end: the last durable
// position is on disk when it returns).
func (c *checkpoint) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.writing {
		return
	}
	c.flushing++
	defer func() { c.flushing-- }()
	select {
	case c.wake <- struct{}{}:
	default: // a wake is pending already
	}
	for c.writing {
		c.idle.Wait()
	}
	select {
	case <-c.wake: // not taken: the loop was writing, not pausing
	default:
	}
}

// Mark returns the watermark.
func (c *checkpoint) Mark() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mark
}

func (c *checkpoint) snapshotLocked() (stateDoc, uint64) {
	doc := stateDoc{
		Version: stateVersion, Channel: c.shownURL, ChannelHash: channelHash(c.streamURL),
		LastEventID: c.mark,
	}
	if len(c.done) > 0 {
		seqs := make([]uint64, 0, len(c.done))
		for s, id := range c.done {
			if id != "" {
				seqs = append(seqs, s)
			}
		}
		sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
		for _, s := range seqs {
			doc.DoneAfter = append(doc.DoneAfter, c.done[s])
		}
	}
	for _, m := range c.lanes {
		if doc.LanesDone == nil {
			doc.LanesDone = map[string][]string{}
		}
		doc.LanesDone[m.id] = slices.Sorted(slices.Values(m.names))
	}
	return doc, c.version
}

// write stores doc unless a newer version is already on disk.
func (c *checkpoint) write(doc stateDoc, version uint64) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if version <= c.written {
		return
	}
	if doc.LastEventID == "" && len(doc.DoneAfter) == 0 && len(doc.LanesDone) == 0 {
		return // nothing worth resuming from yet
	}
	doc.UpdatedAt = c.now().UTC()
	data, err := json.MarshalIndent(doc, "", "  ")
	if err == nil {
		data = append(data, '\n')
		err = atomicfile.Write(c.path, data, 0o600)
	}
	if err != nil {
		c.onWriteErr(fmt.Errorf("writing the state file %s: %w", c.path, err))
		return
	}
	c.written = version
	c.onWriteErr(nil)
}
