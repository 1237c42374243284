package relay

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// DataFile is the name of the history file in Options.DataDir.
const DataFile = "relay.db"

// Errors of New for an unusable Options.DataDir, checked with errors.Is.
var (
	// ErrDataDirInUse: another process (another hookline serve) has the
	// history file open; bbolt's file lock is exclusive.
	ErrDataDirInUse = errors.New("the data directory is in use by another process")
	// ErrDataDirDamaged: the history file is not one the relay wrote, was
	// written by a newer hookline, or is damaged.
	ErrDataDirDamaged = errors.New("the history file is damaged or not a hookline relay's")
)

// lockTimeout is how long New waits for the history file's lock.
const lockTimeout = time.Second

// Buckets of the history file: meta holds "format"; channels holds one
// nested bucket per channel, whose keys are ids (8 bytes, big endian, so
// that they sort in id order) and values records (see record.go).
var (
	metaBucket     = []byte("meta")
	formatKey      = []byte("format")
	channelsBucket = []byte("channels")
	heldBucket     = []byte("held")   // per channel: records redeliveries refer to that left the history
	accessBucket   = []byte("access") // private channels: name -> Access as JSON (the token's hash, never the token)
	fileFormat     = []byte("hookline-relay-1")
)

// historyFile is the bbolt file behind a ledgerStore with Options.DataDir:
// one write transaction per delivery, committed (fdatasync) before the
// POST is answered, and read back whole into the ledger when the relay
// starts. Its methods are called with the ledgerStore's lock held.
type historyFile struct {
	db   *bolt.DB
	log  *slog.Logger
	refs map[string]map[int64]int // by channel: the ids redeliveries refer to (record.go), and how many do
	// observe is told how long each write took (Options.ObserveWrite).
	observe func(time.Duration)
}

// openBolt opens (creating it if needed) the history file in dir and
// returns a store that holds its deliveries in memory, loaded from it and
// trimmed to the limits.
func openBolt(dir string, l Limits, pinned *atomic.Int64, log *slog.Logger, observe func(time.Duration)) (*ledgerStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("relay: cannot create the data directory: %w", err)
	}
	path := filepath.Join(dir, DataFile)
	_, statErr := os.Stat(path)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout})
	var pathErr *fs.PathError
	switch {
	case err == nil:
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("relay: %s is locked (waited %s): %w", path, lockTimeout, ErrDataDirInUse)
	case errors.As(err, &pathErr) || statErr != nil:
		// The file system refused (permissions, a directory in the way...).
		return nil, fmt.Errorf("relay: cannot open %s: %w", path, err)
	default:
		// The file is there, readable and lockable, and bbolt refuses its
		// content (invalid, version mismatch, checksum, too small...).
		return nil, fmt.Errorf("relay: %s: %v: %w", path, err, ErrDataDirDamaged)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		// A new file: make its directory entry durable too.
		if err := syncDir(dir); err != nil {
			db.Close()
			return nil, fmt.Errorf("relay: cannot sync the data directory: %w", err)
		}
	}
	f := &historyFile{db: db, log: log, refs: map[string]map[int64]int{}, observe: observe}
	s := newMemStore(l, pinned)
	s.file = f
	if err := db.Update(func(tx *bolt.Tx) error {
		if err := f.load(tx, s.l); err != nil {
			return err
		}
		return f.loadAccess(tx, s.access)
	}); err != nil {
		db.Close()
		return nil, err
	}
	for _, c := range s.l.chans {
		for _, e := range c.entries {
			e.d.refs.Add(1) // held by the history, as append does
		}
	}
	for _, a := range s.access {
		s.networks[a.Network]++
	}
	return s, nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// load checks the file's format, reads every channel into the ledger l
// (deleting records that do not decode, with a warning), orders channels by
// their newest delivery, and trims what the limits no longer allow.
func (s *historyFile) load(tx *bolt.Tx, l *ledger) error {
	meta, err := tx.CreateBucketIfNotExists(metaBucket)
	if err != nil {
		return fmt.Errorf("relay: initialising the history file: %w", err)
	}
	switch f := meta.Get(formatKey); {
	case f == nil:
		if tx.Bucket(channelsBucket) != nil {
			return fmt.Errorf("relay: the history file has channels but no format: %w", ErrDataDirDamaged)
		}
		if err := meta.Put(formatKey, fileFormat); err != nil {
			return fmt.Errorf("relay: initialising the history file: %w", err)
		}
	case !bytes.Equal(f, fileFormat):
		return fmt.Errorf("relay: the history file has format %q, this hookline reads %q: %w", truncate(string(f), 64), fileFormat, ErrDataDirDamaged)
	}
	root, err := tx.CreateBucketIfNotExists(channelsBucket)
	if err != nil {
		return fmt.Errorf("relay: initialising the history file: %w", err)
	}
	if _, err := tx.CreateBucketIfNotExists(heldBucket); err != nil {
		return fmt.Errorf("relay: initialising the history file: %w", err)
	}

	type loaded struct {
		c      *ledgerChan
		newest time.Time
	}
	var chans []loaded
	var empty [][]byte
	err = root.ForEachBucket(func(name []byte) error {
		b := root.Bucket(name)
		c := &ledgerChan{name: string(name)}
		if ValidChannelName(c.name) != nil {
			s.log.Warn("dropping a channel with an invalid name from the history file", "channel", truncate(c.name, 64))
			empty = append(empty, slices.Clone(name))
			return nil
		}
		var newest time.Time
		var bad, nested [][]byte
		err := b.ForEach(func(k, v []byte) error {
			if v == nil {
				s.log.Warn("dropping a bucket that is not a delivery from the history file", "channel", c.name, "key", fmt.Sprintf("%x", k))
				nested = append(nested, slices.Clone(k))
				return nil
			}
			var d *Entry
			err := fmt.Errorf("%w: key of %d bytes", ErrBadRecord, len(k))
			if len(k) == 8 {
				d, err = readDelivery(tx, name, k, v)
			}
			if err != nil {
				s.log.Warn("dropping an unreadable delivery from the history file", "channel", c.name, "key", fmt.Sprintf("%x", k), "err", err)
				bad = append(bad, slices.Clone(k))
				return nil
			}
			if d.of != 0 {
				s.ref(c.name, d.of, 1)
			}
			e := newLedgerEntry(d, true)
			c.entries = append(c.entries, e)
			c.bytes += e.size
			c.last = d.id
			newest = d.received
			return nil
		})
		if err != nil {
			return err
		}
		if err := deleteKeys(b, bad); err != nil {
			return err
		}
		for _, k := range nested {
			if err := b.DeleteBucket(k); err != nil {
				return err
			}
		}
		if len(c.entries) == 0 {
			empty = append(empty, slices.Clone(name))
			return nil
		}
		chans = append(chans, loaded{c, newest})
		return nil
	})
	if err != nil {
		return fmt.Errorf("relay: reading the history file: %w", err)
	}
	for _, name := range empty {
		if err := root.DeleteBucket(name); err != nil {
			return fmt.Errorf("relay: cleaning the history file: %w", err)
		}
	}
	slices.SortStableFunc(chans, func(a, b loaded) int { return a.newest.Compare(b.newest) })
	for _, lc := range chans {
		lc.c.elem = l.lru.PushBack(lc.c)
		l.chans[lc.c.name] = lc.c
		l.bytes += lc.c.bytes
		l.retained += len(lc.c.entries)
	}
	// Held records no reference needs any more (a crash between two
	// writes cannot leave any, but a file trimmed by hand can).
	held := tx.Bucket(heldBucket)
	var unheld [][2][]byte
	err = held.ForEachBucket(func(name []byte) error {
		return held.Bucket(name).ForEach(func(k, _ []byte) error {
			if len(k) != 8 || s.refs[string(name)][int64(binary.BigEndian.Uint64(k))] == 0 {
				unheld = append(unheld, [2][]byte{slices.Clone(name), slices.Clone(k)})
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("relay: reading the history file: %w", err)
	}
	for _, nk := range unheld {
		if err := held.Bucket(nk[0]).Delete(nk[1]); err != nil {
			return fmt.Errorf("relay: cleaning the history file: %w", err)
		}
	}
	if err := s.remove(tx, l.trim()); err != nil {
		return fmt.Errorf("relay: trimming the history file to the limits: %w", err)
	}
	return nil
}

// ref adds n to the references to record id of channel.
func (s *historyFile) ref(channel string, id int64, n int) {
	m := s.refs[channel]
	if m == nil {
		m = map[int64]int{}
		s.refs[channel] = m
	}
	if m[id] += n; m[id] <= 0 {
		delete(m, id)
		if len(m) == 0 {
			delete(s.refs, channel)
		}
	}
}

// readDelivery decodes the record v with key k of channel, resolving a
// reference (record.go) to the record it repeats, in the channel or held.
func readDelivery(tx *bolt.Tx, channel, k, v []byte) (*Entry, error) {
	of, err := RefersTo(v)
	if err != nil {
		return nil, err
	}
	var orig []byte
	if of != 0 {
		if b := tx.Bucket(channelsBucket).Bucket(channel); b != nil {
			orig = b.Get(idKey(of))
		}
		if hb := tx.Bucket(heldBucket).Bucket(channel); orig == nil && hb != nil {
			orig = hb.Get(idKey(of))
		}
	}
	return DecodeEntry(int64(binary.BigEndian.Uint64(k)), v, orig)
}

// remove deletes what the limits evicted: records, and the buckets of
// channels left empty. A record that redeliveries still refer to moves to
// the held bucket; a held record no reference needs any more goes. It
// updates s.refs, so the caller restores them if the transaction fails
// (see append).
func (s *historyFile) remove(tx *bolt.Tx, rs []removal) error {
	root, held := tx.Bucket(channelsBucket), tx.Bucket(heldBucket)
	for _, r := range rs {
		name := []byte(r.name)
		// References first: the records they repeat may leave with them.
		for _, e := range r.entries {
			if e.of == 0 {
				continue
			}
			s.ref(r.name, e.of, -1)
			if hb := held.Bucket(name); s.refs[r.name][e.of] == 0 && hb != nil {
				if err := hb.Delete(idKey(e.of)); err != nil {
					return err
				}
			}
		}
		b := root.Bucket(name)
		if b == nil {
			continue
		}
		for _, e := range r.entries {
			if s.refs[r.name][e.id] == 0 {
				continue
			}
			hb, err := held.CreateBucketIfNotExists(name)
			if err != nil {
				return err
			}
			if v := b.Get(idKey(e.id)); v != nil {
				if err := hb.Put(idKey(e.id), slices.Clone(v)); err != nil {
					return err
				}
			}
		}
		if r.all {
			if err := root.DeleteBucket(name); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
				return err
			}
			continue
		}
		for _, e := range r.entries {
			if err := b.Delete(idKey(e.id)); err != nil {
				return err
			}
		}
	}
	return nil
}

// loadAccess reads the private channels' records into m, dropping (with an
// error in the log) those that do not decode: their channels are unknown
// from then on (a private channel's name without a record is a 404, see
// IsPrivateName), never public; a damaged record is not worth refusing to
// start for, but it is worth saying.
func (s *historyFile) loadAccess(tx *bolt.Tx, m map[string]Access) error {
	b, err := tx.CreateBucketIfNotExists(accessBucket)
	if err != nil {
		return fmt.Errorf("relay: initialising the history file: %w", err)
	}
	var bad [][]byte
	err = b.ForEach(func(k, v []byte) error {
		var a Access
		if err := json.Unmarshal(v, &a); err != nil || ValidChannelName(string(k)) != nil {
			s.log.Error("dropping a damaged private channel record from the history file: the channel is unknown from now on (404), never public; its owner makes a new one", "channel", truncate(string(k), 64), "err", err)
			bad = append(bad, slices.Clone(k))
			return nil
		}
		m[string(k)] = a
		return nil
	})
	if err != nil {
		return err
	}
	return deleteKeys(b, bad)
}

// deleteKeys deletes keys from b (what a load found damaged).
func deleteKeys(b *bolt.Bucket, keys [][]byte) error {
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// putAccess stores a private channel's record, or deletes it (a nil a).
func (s *historyFile) putAccess(channel string, a *Access) error {
	var v []byte
	if a != nil {
		var err error
		if v, err = json.Marshal(a); err != nil {
			return err
		}
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		if a == nil {
			return tx.Bucket(accessBucket).Delete([]byte(channel))
		}
		return tx.Bucket(accessBucket).Put([]byte(channel), v)
	})
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrStoreClosed
	}
	if err != nil {
		return fmt.Errorf("relay: storing the private channel: %w", err)
	}
	return nil
}

func idKey(id int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(id)) }

// write stores d as delivery p.id of channel, in one transaction with the
// removals p's drops make (rs). It reports whether d was written as a
// reference to the record it repeats (d.of), which is still stored; s.refs
// are restored when the transaction fails.
func (s *historyFile) write(channel string, d *Entry, p plan, rs []removal) (referred bool, err error) {
	rec, ref := d.Record(), d.RefRecord()
	saved := map[string]map[int64]int{channel: maps.Clone(s.refs[channel])} // restored if the transaction fails
	for _, r := range rs {
		saved[r.name] = maps.Clone(s.refs[r.name])
	}
	start := time.Now()
	err = s.db.Update(func(tx *bolt.Tx) error {
		root := tx.Bucket(channelsBucket)
		b := root.Bucket([]byte(channel))
		if ref != nil {
			// A redelivery refers to the record it repeats while that is
			// stored (in the history, or held for other references); the
			// reference counts before the limits evict, so that an
			// eviction by this very append holds the record too.
			hb := tx.Bucket(heldBucket).Bucket([]byte(channel))
			if b != nil && b.Get(idKey(d.of)) != nil || hb != nil && hb.Get(idKey(d.of)) != nil {
				rec, referred = ref, true
				s.ref(channel, d.of, 1)
			}
		}
		if err := s.remove(tx, rs); err != nil {
			return err
		}
		b, err := root.CreateBucketIfNotExists([]byte(channel))
		if err != nil {
			return err
		}
		b.FillPercent = 0.9 // ids only grow: pack pages nearly full
		return b.Put(idKey(p.id), rec)
	})
	if err == nil && s.observe != nil {
		s.observe(time.Since(start))
	}
	if err != nil {
		for name, m := range saved {
			if delete(s.refs, name); len(m) > 0 {
				s.refs[name] = m
			}
		}
		if errors.Is(err, berrors.ErrDatabaseNotOpen) {
			err = ErrStoreClosed
		}
		return false, fmt.Errorf("relay: storing the delivery: %w", err)
	}
	return referred, nil
}
