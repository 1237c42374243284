package relay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"strings"
	"time"

	"github.com/hookline/hookline/internal/wire"
	"github.com/hookline/hookline/rest/header"
)

// A record is an Entry as a store keeps it (Entry.Record: the bbolt file
// and redisstore); its id is the store's key, not part of the record. Format 1, every length an unsigned varint:
//
//	0x01                           format
//	varint   received time         Unix nanoseconds (zigzag varint)
//	uvarint  n                     header fields, then n times:
//	uvarint  len, bytes            the lowercase name
//	uvarint  len, bytes            the value
//	uvarint  len, bytes            the raw query string
//	uvarint  len, bytes            the body
//	4 bytes                        CRC-32C (Castagnoli) of all of the above, big endian
//
// Everything a message is made of is derived again from these on decode
// (makeDelivery), so a delivery replayed after a restart is byte for byte
// the message it was before.
//
// A redelivery is stored in the history file as a reference to the record it
// repeats (format 2), so that asking for redeliveries of a large delivery
// costs a few bytes each on disk, not a copy:
//
//	0x02                           format
//	varint   received time         Unix nanoseconds (zigzag varint)
//	uvarint  of                    the id of the record repeated (format 1)
//	4 bytes                        CRC-32C of all of the above, big endian
const (
	recordFormat = 1
	refFormat    = 2
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// ErrBadRecord reports a stored record that cannot be decoded: damaged, or
// written by a newer hookline.
var ErrBadRecord = errors.New("relay: unreadable stored delivery")

// Record returns d's record (format 1): everything its messages are made
// of, so that DecodeEntry gives back the same messages byte for byte.
func (d *Entry) Record() []byte {
	n := 1 + binary.MaxVarintLen64*(4+2*len(d.header)) + len(d.query) + len(d.body) + 4
	for _, h := range d.header {
		n += len(h.Name) + len(h.Value)
	}
	b := make([]byte, 0, n)
	b = append(b, recordFormat)
	b = binary.AppendVarint(b, d.received.UnixNano())
	b = binary.AppendUvarint(b, uint64(len(d.header)))
	for _, h := range d.header {
		b = appendField(b, h.Name)
		b = appendField(b, h.Value)
	}
	b = appendField(b, d.query)
	b = binary.AppendUvarint(b, uint64(len(d.body)))
	b = append(b, d.body...)
	return appendCRC(b)
}

// appendCRC appends the checksum of b.
func appendCRC(b []byte) []byte {
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32c))
}

func appendField(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// RefRecord returns, for a redelivery (Of not 0), a record of a few bytes
// that refers to the record of delivery Of (format 2), and nil otherwise.
// DecodeEntry reads it back given that record.
func (d *Entry) RefRecord() []byte {
	if d.of == 0 {
		return nil
	}
	b := []byte{refFormat}
	b = binary.AppendVarint(b, d.received.UnixNano())
	b = binary.AppendUvarint(b, uint64(d.of))
	return appendCRC(b)
}

// decodeRef returns the time and the id of the record a reference record
// names; ok is false for a record of another format. Errors wrap
// ErrBadRecord.
func decodeRef(rec []byte) (received time.Time, of int64, ok bool, err error) {
	if len(rec) == 0 || rec[0] != refFormat {
		return time.Time{}, 0, false, nil
	}
	if len(rec) < 5 || crc32.Checksum(rec[:len(rec)-4], crc32c) != binary.BigEndian.Uint32(rec[len(rec)-4:]) {
		return time.Time{}, 0, true, fmt.Errorf("%w: reference checksum mismatch", ErrBadRecord)
	}
	r := recordReader{b: rec[1 : len(rec)-4]}
	t, id := r.varint(), r.uvarint()
	if r.err == nil && (len(r.b) != 0 || id == 0 || id > math.MaxInt64) {
		r.err = fmt.Errorf("%w: malformed reference", ErrBadRecord)
	}
	return time.Unix(0, t), int64(id), true, r.err
}

// RefersTo returns the id of the delivery whose record rec refers to, when
// rec is a RefRecord (a store then passes that record to DecodeEntry), and
// 0 otherwise. Errors wrap ErrBadRecord.
func RefersTo(rec []byte) (int64, error) {
	_, of, _, err := decodeRef(rec)
	return of, err
}

// DecodeEntry returns the entry with the given id whose record is rec (a
// Record or a RefRecord; for a RefRecord, orig is the record of the
// delivery it refers to, RefersTo), copying everything out of both. Errors
// wrap ErrBadRecord.
func DecodeEntry(id int64, rec, orig []byte) (*Entry, error) {
	received, of, isRef, err := decodeRef(rec)
	if err != nil {
		return nil, err
	}
	if isRef {
		if orig == nil || orig[0] == refFormat {
			return nil, fmt.Errorf("%w: the delivery %d it repeats is not stored", ErrBadRecord, of)
		}
		rec = orig
	}
	d, err := decodeRecord(rec)
	if err != nil {
		return nil, err
	}
	if isRef {
		d = redelivery(d.header, d.query, d.body, of, received)
	}
	d.id = id
	return d, nil
}

// decodeRecord returns the delivery a record holds, copying everything out
// of rec (which may be memory that bbolt reuses once the transaction ends).
// Errors wrap ErrBadRecord.
func decodeRecord(rec []byte) (*Entry, error) {
	if len(rec) < 5 {
		return nil, fmt.Errorf("%w: %d bytes is too short", ErrBadRecord, len(rec))
	}
	if rec[0] != recordFormat {
		return nil, fmt.Errorf("%w: format %d, this hookline reads format %d", ErrBadRecord, rec[0], recordFormat)
	}
	payload, sum := rec[:len(rec)-4], binary.BigEndian.Uint32(rec[len(rec)-4:])
	if crc32.Checksum(payload, crc32c) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrBadRecord)
	}
	r := recordReader{b: payload[1:]}
	received := r.varint()
	n := r.uvarint()
	if n > uint64(len(r.b))/2 { // each field takes at least two bytes
		return nil, fmt.Errorf("%w: %d header fields in %d bytes", ErrBadRecord, n, len(r.b))
	}
	fields := make([]wire.Header, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		name, value := r.field(), r.field()
		if r.err == nil && (!header.IsToken(name) || name != strings.ToLower(name)) {
			return nil, fmt.Errorf("%w: header name %q", ErrBadRecord, truncate(name, 64))
		}
		fields = append(fields, wire.Header{Name: name, Value: value})
	}
	query := r.field()
	body := r.bytes()
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the body", ErrBadRecord, len(r.b))
	}
	return makeDelivery(fields, query, body, time.Unix(0, received)), nil
}

// recordReader reads a record's fields; the first error sticks.
type recordReader struct {
	b   []byte
	err error
}

func (r *recordReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: truncated %s", ErrBadRecord, what)
	}
	r.b = nil
}

func (r *recordReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("time")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recordReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("length")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// field reads a length-prefixed string (copied).
func (r *recordReader) field() string { return string(r.next()) }

// bytes reads a length-prefixed byte slice (copied; never nil).
func (r *recordReader) bytes() []byte { return append([]byte{}, r.next()...) }

// next returns the bytes of a length-prefixed field, not copied.
func (r *recordReader) next() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail("field")
		return nil
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}
