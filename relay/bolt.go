package relay

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
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
	fileFormat     = []byte("hookline-relay-1")
)

// boltStore keeps the history in a bbolt file: one write transaction per
// delivery, committed (fdatasync) before the POST is answered. Deliveries are read
// back (decoded) for replays and redeliveries; only ids, sizes and
// Idempotency-Keys stay in memory, in the ledger, so that evictions and
// duplicate checks need no disk read.
type boltStore struct {
	db  *bolt.DB
	log *slog.Logger

	mu     sync.Mutex // guards l; held across each write transaction
	l      *ledger
	closed bool
}

// openBolt opens (creating it if needed) the history file in dir, loads the
// ledger from it, and applies the limits to what it holds.
func openBolt(dir string, l limits, log *slog.Logger) (*boltStore, error) {
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
	s := &boltStore{db: db, log: log, l: newLedger(l)}
	if err := db.Update(s.load); err != nil {
		db.Close()
		return nil, err
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

// load checks the file's format, reads every channel into the ledger
// (deleting records that do not decode, with a warning), orders channels by
// their newest delivery, and trims what the limits no longer allow.
func (s *boltStore) load(tx *bolt.Tx) error {
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
			d, err := decodeRecord(v)
			if err == nil && len(k) != 8 {
				err = fmt.Errorf("%w: key of %d bytes", errBadRecord, len(k))
			}
			if err != nil {
				s.log.Warn("dropping an unreadable delivery from the history file", "channel", c.name, "key", fmt.Sprintf("%x", k), "err", err)
				bad = append(bad, slices.Clone(k))
				return nil
			}
			d.id = int64(binary.BigEndian.Uint64(k))
			e := newEntry(d, false)
			c.entries = append(c.entries, e)
			c.bytes += e.size
			c.last = d.id
			newest = d.received
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range bad {
			if err := b.Delete(k); err != nil {
				return err
			}
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
		lc.c.elem = s.l.lru.PushBack(lc.c)
		s.l.chans[lc.c.name] = lc.c
		s.l.bytes += lc.c.bytes
		s.l.retained += len(lc.c.entries)
	}
	if err := remove(root, s.l.trim()); err != nil {
		return fmt.Errorf("relay: trimming the history file to the limits: %w", err)
	}
	return nil
}

// remove deletes what the limits evicted: records, and the buckets of
// channels left empty.
func remove(root *bolt.Bucket, rs []removal) error {
	for _, r := range rs {
		name := []byte(r.name)
		if r.all {
			if err := root.DeleteBucket(name); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
				return err
			}
			continue
		}
		b := root.Bucket(name)
		if b == nil {
			continue
		}
		for _, id := range r.ids {
			if err := b.Delete(idKey(id)); err != nil {
				return err
			}
		}
	}
	return nil
}

func idKey(id int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(id)) }

func (s *boltStore) append(ctx context.Context, channel string, d *delivery, after int64) error {
	rec := encodeRecord(d)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errStoreClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p := s.l.prepare(channel, newEntry(d, false), after)
	rs := make([]removal, len(p.drops))
	for i, dr := range p.drops {
		rs[i] = dr.removal(channel)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		root := tx.Bucket(channelsBucket)
		if err := remove(root, rs); err != nil {
			return err
		}
		b, err := root.CreateBucketIfNotExists([]byte(channel))
		if err != nil {
			return err
		}
		b.FillPercent = 0.9 // ids only grow: pack pages nearly full
		return b.Put(idKey(p.id), rec)
	})
	if err != nil {
		return fmt.Errorf("relay: storing the delivery: %w", err)
	}
	d.id = p.id
	s.l.commit(p)
	return nil
}

func (s *boltStore) since(_ context.Context, channel string, after, maxBytes int64) (page []*delivery, first, last int64, err error) {
	first, last = 1, 0
	err = s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(channelsBucket).Bucket([]byte(channel))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		k, _ := c.Last()
		if k == nil {
			return nil
		}
		last = int64(binary.BigEndian.Uint64(k))
		k, _ = c.First()
		first = int64(binary.BigEndian.Uint64(k))
		var n int64
		for k, v := c.Seek(idKey(max(nextID(after), 1))); k != nil; k, v = c.Next() {
			if len(page) > 0 && n+int64(len(v)) > maxBytes {
				break // the record's length is about the delivery's size
			}
			d, err := decodeRecord(v)
			if err != nil {
				// Left out: the reader sees a gap. load drops it at the
				// next start.
				s.log.Warn("skipping an unreadable delivery in the history file", "channel", channel, "key", fmt.Sprintf("%x", k), "err", err)
				continue
			}
			d.id = int64(binary.BigEndian.Uint64(k))
			page = append(page, d)
			n += d.size
		}
		return nil
	})
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		err = errStoreClosed
	}
	if err != nil {
		return nil, 0, 0, fmt.Errorf("relay: reading the history: %w", err)
	}
	if last == 0 {
		first = 1
	}
	return page, first, last, nil
}

func (s *boltStore) get(_ context.Context, channel string, id int64) (*delivery, error) {
	var d *delivery
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(channelsBucket).Bucket([]byte(channel))
		if b == nil || id <= 0 {
			return nil
		}
		v := b.Get(idKey(id))
		if v == nil {
			return nil
		}
		var err error
		if d, err = decodeRecord(v); err != nil {
			return err
		}
		d.id = id
		return nil
	})
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		err = errStoreClosed
	}
	if err != nil {
		return nil, fmt.Errorf("relay: reading delivery %d: %w", id, err)
	}
	return d, nil
}

func (s *boltStore) findKey(_ context.Context, channel, key string) (int64, [sha256.Size]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.l.findKey(channel, key)
	if !ok {
		return 0, [sha256.Size]byte{}, false, nil
	}
	return e.id, e.key.sum, true, nil
}

func (s *boltStore) persistent() bool { return true }

func (s *boltStore) missing(_ context.Context, channels []string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.l.missing(channels)
}

func (s *boltStore) stats(context.Context) storeStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.l.stats()
}

// close waits for a write in progress, then closes the file (releasing its
// lock).
func (s *boltStore) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.db.Close()
}
