// Package capture reads and writes capture files: one JSON document per
// webhook delivery, holding everything needed to replay it byte-exact.
//
// `hookline forward --save DIR` writes them, `hookline replay` reads them, and
// the repository's testdata/ holds a set of them.
//
// # Format (version 1)
//
//	{
//	  "version": 1,
//	  "id": "d3b07384-...",              delivery id (X-GitHub-Delivery)
//	  "event": "issues",                 event name (X-GitHub-Event)
//	  "action": "opened",                payload's top-level action, if any
//	  "received_at": "2026-11-22T10:00:00.123Z",
//	  "source": "https://relay.example/abc",   where it came from (URL with
//	                                     credentials removed, or a file, or "send")
//	  "method": "POST",
//	  "query": "a=1",                    raw query string, if any
//	  "headers": {"Content-Type": ["application/json"], ...},
//	  "body_encoding": "text",           "text" or "base64"
//	  "body": "{\"action\":\"opened\",...}"
//	}
//
// The body is stored as a JSON string when it is valid UTF-8 ("text": the
// string decodes to exactly the original bytes) and as standard base64
// otherwise. Headers are stored in canonical form, in their original order
// per name; secrets and Authorization values are the caller's to drop before
// writing (hookline never writes them).
//
// A reader rejects a file whose version it does not know, whose body does not
// decode, or that lacks an event name, with an error naming the file. It
// reads regular files only (a FIFO named *.json would block) of at most
// MaxFileSize bytes, so a hostile folder cannot hang or exhaust it. Load
// stops at the first bad file; LoadAll, for folders that may hold damaged
// files (a disk that filled up), reads every good one and returns one error
// per bad one: `hookline replay` uses it, so one bad file never holds back
// the others.
//
// `hookline forward` writes the deliveries its target did not take to a
// "failed" folder in this format, to be replayed once the target is back.
//
// Read also accepts gosmee's --saveDir files (a body and a curl script; see
// gosmee.go for their layout), and WriteScript writes a shell script that
// re-sends a delivery byte for byte with curl.
package capture

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookline/hookline/delivery"
)

// Version is the capture format version this package writes and reads.
const Version = 1

// Body encodings.
const (
	EncodingText   = "text"
	EncodingBase64 = "base64"
)

// Errors returned by Read and Load, wrapped with the file name.
var (
	// ErrVersion means the file's version is not one this hookline reads.
	ErrVersion = errors.New("unsupported capture file version")
	// ErrMalformed means the file is not a valid capture document.
	ErrMalformed = errors.New("malformed capture file")
	// ErrNotCapture, with ErrMalformed, means a JSON object without a
	// "version": some other document, such as a webhook payload.
	ErrNotCapture = errors.New("not a capture file")
)

// File is a delivery as a capture file holds it: the delivery (its body
// source is delivery.BodyCapture once read) and what the file says about
// it.
type File struct {
	delivery.Delivery
	Action string // top-level "action" of the payload, if any
	Source string // where it came from, without credentials
	Note   string // why it was kept, for a delivery in a failed folder

	// Path is the file the delivery was read from. Read and Load set it;
	// Marshal and Write ignore it.
	Path string
}

// document is the on-disk JSON shape.
type document struct {
	Version      int                 `json:"version"`
	ID           string              `json:"id"`
	Event        string              `json:"event"`
	Action       string              `json:"action,omitempty"`
	ReceivedAt   time.Time           `json:"received_at"`
	Source       string              `json:"source,omitempty"`
	Method       string              `json:"method,omitempty"`
	Query        string              `json:"query,omitempty"`
	Headers      map[string][]string `json:"headers"`
	BodyEncoding string              `json:"body_encoding"`
	Body         string              `json:"body"`
	Note         string              `json:"note,omitempty"`
}

// Marshal returns the capture document for d, indented for people to read.
func Marshal(d File) ([]byte, error) {
	if d.Event == "" {
		return nil, fmt.Errorf("%w: delivery %q has no event name", ErrMalformed, d.ID)
	}
	doc := document{
		Version:    Version,
		ID:         d.ID,
		Event:      d.Event,
		Action:     d.Action,
		ReceivedAt: d.ReceivedAt.UTC(),
		Source:     d.Source,
		Method:     d.Method,
		Query:      d.Query,
		Headers:    map[string][]string(d.Headers),
		Note:       d.Note,
	}
	if doc.Headers == nil {
		doc.Headers = map[string][]string{}
	}
	if utf8.Valid(d.Body) {
		doc.BodyEncoding, doc.Body = EncodingText, string(d.Body)
	} else {
		doc.BodyEncoding, doc.Body = EncodingBase64, base64.StdEncoding.EncodeToString(d.Body)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Unmarshal parses a capture document.
func Unmarshal(data []byte) (File, error) {
	var probe struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return File{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if probe.Version == nil {
		return File{}, fmt.Errorf("%w: no \"version\" field (%w)", ErrMalformed, ErrNotCapture)
	}
	if *probe.Version != Version {
		return File{}, fmt.Errorf("%w %d (this hookline reads version %d; upgrade hookline)", ErrVersion, *probe.Version, Version)
	}
	var doc document
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return File{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if doc.Event == "" {
		return File{}, fmt.Errorf("%w: no \"event\" name", ErrMalformed)
	}
	d := File{
		Delivery: delivery.Delivery{
			ID:         doc.ID,
			Event:      doc.Event,
			ReceivedAt: doc.ReceivedAt,
			Method:     doc.Method,
			Query:      doc.Query,
			Headers:    http.Header{},
			BodySource: delivery.BodyCapture,
		},
		Action: doc.Action,
		Source: doc.Source,
		Note:   doc.Note,
	}
	for k, v := range doc.Headers {
		d.Headers[http.CanonicalHeaderKey(k)] = append(d.Headers[http.CanonicalHeaderKey(k)], v...)
	}
	switch doc.BodyEncoding {
	case EncodingText:
		d.Body = []byte(doc.Body)
	case EncodingBase64:
		b, err := base64.StdEncoding.DecodeString(doc.Body)
		if err != nil {
			return File{}, fmt.Errorf("%w: body is not valid base64: %v", ErrMalformed, err)
		}
		d.Body = b
	default:
		return File{}, fmt.Errorf("%w: body_encoding %q (want %q or %q)", ErrMalformed, doc.BodyEncoding, EncodingText, EncodingBase64)
	}
	return d, nil
}

// FileName returns the file name for d: `<time>-<event>-<delivery>.json`,
// with every character outside [A-Za-z0-9_-] of the event and delivery id
// replaced by '_' and each part cut to 64 bytes, so no header value can
// steer the file elsewhere (no separators, no dots, no hidden files).
func FileName(d *delivery.Delivery) string {
	ts := d.ReceivedAt.UTC().Format("20060102T150405.000Z")
	id := safePart(d.ID)
	if id == "" {
		id = "noid"
	}
	return ts + "-" + safePart(d.Event) + "-" + id + ".json"
}

func safePart(s string) string {
	const max = 64
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= max {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Write saves d in dir as FileName(d) and returns the path. It writes to a
// temporary file in dir and renames it into place, so a reader never sees a
// half-written capture and a failed write (a full disk) leaves nothing
// behind. An existing file of the same name is never replaced: a numeric
// suffix is added instead.
func Write(dir string, d File) (string, error) {
	data, err := Marshal(d)
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".capture-*.tmp")
	if err != nil {
		return "", fmt.Errorf("saving delivery %s: %w", d.ID, err)
	}
	cleanup := func() { tmp.Close(); os.Remove(tmp.Name()) }
	if _, err := tmp.Write(data); err != nil {
		cleanup()
		return "", fmt.Errorf("saving delivery %s to %s: %w", d.ID, dir, err)
	}
	if err := tmp.Sync(); err != nil {
		cleanup()
		return "", fmt.Errorf("saving delivery %s to %s: %w", d.ID, dir, err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("saving delivery %s to %s: %w", d.ID, dir, err)
	}
	name := FileName(&d.Delivery)
	base := strings.TrimSuffix(name, ".json")
	for i := 1; ; i++ {
		path := filepath.Join(dir, name)
		// Link fails when path exists, unlike Rename, so no capture is
		// ever overwritten.
		err := os.Link(tmp.Name(), path)
		if err == nil {
			os.Remove(tmp.Name())
			return path, nil
		}
		if !errors.Is(err, os.ErrExist) || i > 1000 {
			os.Remove(tmp.Name())
			return "", fmt.Errorf("saving delivery %s: %w", d.ID, err)
		}
		name = fmt.Sprintf("%s-%d.json", base, i+1)
	}
}

// MaxFileSize bounds the capture files Read accepts: 64 MiB holds the
// largest delivery (25 MiB, 33.3 MiB in base64) with its headers, so a
// larger file is not one hookline wrote and is refused rather than read
// into memory.
const MaxFileSize = 64 << 20

// Read reads one capture file. Errors name the file. Anything but a regular
// file (a directory, a FIFO that would block) and files over MaxFileSize
// are refused before reading.
func Read(path string) (File, error) {
	// Stat before opening: opening a FIFO would block.
	st, err := os.Stat(path)
	if err != nil {
		return File{}, err
	}
	if !st.Mode().IsRegular() {
		return File{}, fmt.Errorf("%s: %w: not a regular file", path, ErrMalformed)
	}
	if st.Size() > MaxFileSize {
		return File{}, fmt.Errorf("%s: %w: %d bytes, more than a capture file holds (%d)", path, ErrMalformed, st.Size(), MaxFileSize)
	}
	f, err := os.Open(path)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return File{}, fmt.Errorf("%s: %w: more than %d bytes", path, ErrMalformed, MaxFileSize)
	}
	d, err := Unmarshal(data)
	if err != nil && !errors.Is(err, ErrVersion) {
		// Not a capture: gosmee's --saveDir files (gosmee.go) when its
		// replay script is beside it.
		sh := strings.TrimSuffix(path, ".json") + ".sh"
		if st, serr := os.Stat(sh); serr == nil && st.Mode().IsRegular() && st.Size() <= MaxFileSize {
			if script, serr := os.ReadFile(sh); serr == nil {
				d, err = readGosmee(path, data, script)
			}
		}
	}
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", path, err)
	}
	d.Path = path
	return d, nil
}

// Load reads every capture file named by paths, where a directory stands for
// the *.json files directly in it, and returns them in received-time order
// (ties keep the order of the paths). It stops at the first file that cannot
// be read, naming it; a directory with no capture files is an error too.
func Load(paths ...string) ([]File, error) {
	ds, errs := LoadAll(paths...)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return ds, nil
}

// LoadAll is Load for a folder that may hold damaged files (a disk that
// filled up, a file edited by hand): it returns every capture it could read,
// in received-time order, and one error per path or file it could not read
// (each naming it), in the order of paths. One bad file never hides the
// others.
func LoadAll(paths ...string) ([]File, []error) {
	var files []string
	var errs []error
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		matches, err := filepath.Glob(filepath.Join(p, "*.json"))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(matches) == 0 {
			errs = append(errs, fmt.Errorf("%s: no capture files (*.json) in this directory", p))
			continue
		}
		sort.Strings(matches)
		files = append(files, matches...)
	}
	out := make([]File, 0, len(files))
	for _, f := range files {
		d, err := Read(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, d)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ReceivedAt.Before(out[j].ReceivedAt) })
	return out, errs
}
