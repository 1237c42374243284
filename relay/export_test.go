package relay

import (
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// What the external tests (store_test.go) reach of this package's engine
// and its bbolt file.

var (
	LockTimeout = lockTimeout
	MetaBucket  = metaBucket
	FormatKey   = formatKey
	AppendCRC   = appendCRC
)

// SetQuietGap sets how long a stream must have had no delivery for a
// publisher to write the next (quietGap), and returns what puts it back.
func SetQuietGap(d time.Duration) (restore func()) {
	old := quietGap.Swap(int64(d))
	return func() { quietGap.Store(old) }
}

// OpenMemory returns the in-memory store New uses without a data directory.
func OpenMemory(l Limits) Store { return newMemStore(l, new(atomic.Int64)) }

// OpenFile opens the store New uses with Options.DataDir dir.
func OpenFile(dir string, l Limits) (Store, error) {
	s, err := openBolt(dir, l, new(atomic.Int64), slog.New(slog.DiscardHandler), nil)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return s, nil
}

// FileStored returns the bytes of the records of channel in s's file, and
// of those held for references.
func FileStored(s Store, channel string) (records, held int, err error) {
	err = s.(*ledgerStore).file.db.View(func(tx *bolt.Tx) error {
		count := func(b *bolt.Bucket, n *int) error {
			if b == nil {
				return nil
			}
			return b.ForEach(func(_, v []byte) error { *n += len(v); return nil })
		}
		if err := count(tx.Bucket(channelsBucket).Bucket([]byte(channel)), &records); err != nil {
			return err
		}
		return count(tx.Bucket(heldBucket).Bucket([]byte(channel)), &held)
	})
	return records, held, err
}

// DamageFileRecord flips a byte in the middle of record id of channel in
// s's file.
func DamageFileRecord(s Store, channel string, id int64) error {
	return s.(*ledgerStore).file.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(channelsBucket).Bucket([]byte(channel))
		v := slices.Clone(b.Get(idKey(id)))
		v[len(v)/2] ^= 0xff
		return b.Put(idKey(id), v)
	})
}
