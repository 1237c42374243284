package payload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"time"
)

// Timestamp is a time as GitHub sends it: an RFC 3339 string, or, for a few
// properties (a push event's repository.created_at and pushed_at), Unix
// seconds, or in some older check_run deliveries "2018-04-25 20:42:10"
// (UTC). It keeps the JSON it was decoded from, so encoding writes back
// exactly that; Time parses it. The zero Timestamp is absent and encodes as
// null.
type Timestamp struct {
	raw string
}

// NewTimestamp returns the Timestamp of t as an RFC 3339 string.
func NewTimestamp(t time.Time) Timestamp {
	return Timestamp{raw: strconv.Quote(t.Format(time.RFC3339Nano))}
}

// Time parses the timestamp. The zero Timestamp gives the zero time.Time
// and no error.
func (t Timestamp) Time() (time.Time, error) {
	switch {
	case t.raw == "":
		return time.Time{}, nil
	case t.raw[0] == '"':
		s, err := strconv.Unquote(t.raw)
		if err != nil {
			return time.Time{}, fmt.Errorf("payload: timestamp %s: %w", t.raw, err)
		}
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			return t, nil
		}
		return time.Parse(time.DateTime, s) // check_run's older deliveries, UTC
	}
	sec, err := strconv.ParseFloat(t.raw, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("payload: timestamp %s: %w", t.raw, err)
	}
	return time.Unix(0, int64(sec*1e9)).UTC(), nil
}

// IsZero reports whether the timestamp is absent (or was null).
func (t Timestamp) IsZero() bool { return t.raw == "" }

// String is the timestamp as GitHub sent it, without quotes.
func (t Timestamp) String() string {
	if s, err := strconv.Unquote(t.raw); err == nil {
		return s
	}
	return t.raw
}

// UnmarshalJSON keeps a JSON string or number; null leaves the zero
// Timestamp.
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == "null":
		*t = Timestamp{}
		return nil
	case len(b) > 0 && (b[0] == '"' || b[0] == '-' || '0' <= b[0] && b[0] <= '9'):
		*t = Timestamp{raw: string(b)}
		return nil
	}
	return &json.UnmarshalTypeError{Value: "timestamp " + string(b), Type: typeOfTimestamp}
}

// MarshalJSON writes what was decoded, or null.
func (t Timestamp) MarshalJSON() ([]byte, error) {
	if t.raw == "" {
		return []byte("null"), nil
	}
	return []byte(t.raw), nil
}

var typeOfTimestamp = reflect.TypeFor[Timestamp]()
