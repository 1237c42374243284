package capture

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/jsonscan"
)

// gosmee's --saveDir files, which Read also accepts: gosmee (github.com/
// chmouel/gosmee, its client's saveData, as of 2023-2025) writes each
// delivery as two files, `<event>-<time>.json` (or `<time>.json` without
// an event header) holding the body's exact bytes, and `<same>.sh`, a bash
// script that re-sends it with curl: one `-H 'Name: value'` per header
// gosmee kept (the X-* headers and User-Agent, names title-cased), then
// `-H "Content-Type: <type>"`, and `-d @./<same>.json` (which strips line
// breaks: a signature over a pretty-printed body no longer matches; the
// scripts hookline writes, see WriteScript, send the exact bytes). The time
// is "20060102T15h04" in older gosmee, "2006-01-02T15.04.01.000" in newer
// (where the seconds repeat the month, gosmee's own layout): a minute at
// best, so deliveries within one minute are ordered by the file's
// modification time (what gosmee's own listing relies on), and when
// neither layout parses, the modification time stands in. A header's
// word is read as the shell reads it (shellWord): gosmee quotes values
// with single quotes, and writes one inside a value as the shell's
// quote-backslash-quote-quote.
var gosmeeLayouts = []string{"20060102T15h04", "2006-01-02T15.04.01.000"}

// readGosmee returns the delivery of gosmee's files: body is the .json at
// path, script the .sh beside it.
func readGosmee(path string, body, script []byte) (File, error) {
	if bytes.Contains(script, []byte(scriptMark)) {
		// hookline's own script beside a damaged capture: not gosmee's.
		return File{}, fmt.Errorf("%w: not a capture, and the script beside it is hookline's", ErrMalformed)
	}
	h := gosmeeHeaders(string(script))
	if len(h) == 0 {
		return File{}, fmt.Errorf("%w: %s has no -H headers: not a gosmee replay script", ErrMalformed, strings.TrimSuffix(filepath.Base(path), ".json")+".sh")
	}
	d := File{
		Delivery: delivery.Delivery{
			ID: h.Get("X-Github-Delivery"), Method: http.MethodPost,
			Headers: h, Body: body, BodySource: delivery.BodyCapture,
		},
		Source: "gosmee " + filepath.Base(path),
	}
	base := strings.TrimSuffix(filepath.Base(path), ".json")
	prefix := base
	for _, layout := range gosmeeLayouts {
		if len(base) >= len(layout) {
			if t, err := time.Parse(layout, base[len(base)-len(layout):]); err == nil {
				d.ReceivedAt, prefix = t.Truncate(time.Minute), strings.TrimSuffix(base[:len(base)-len(layout)], "-")
				break
			}
		}
	}
	if st, err := os.Stat(path); err == nil {
		mod := st.ModTime().UTC()
		if d.ReceivedAt.IsZero() || (!mod.Before(d.ReceivedAt) && mod.Before(d.ReceivedAt.Add(time.Minute))) {
			d.ReceivedAt = mod // the name's minute, to the nanosecond
		}
	}
	// The event: GitHub's header, else GitLab's or Bitbucket's (gosmee
	// keeps them too), else the file name's prefix.
	for _, name := range []string{"X-Github-Event", "X-Gitlab-Event", "X-Event-Key"} {
		if d.Event == "" {
			d.Event = h.Get(name)
		}
	}
	if d.Event == "" {
		d.Event = prefix
	}
	action, _ := jsonscan.StringMember(body, "action")
	d.Action = string(action)
	return d, nil
}

// gosmeeHeaders returns the headers of the -H words of gosmee's script.
func gosmeeHeaders(script string) http.Header {
	h := http.Header{}
	for i := 0; i < len(script); i++ {
		if !strings.HasPrefix(script[i:], "-H") || (i > 0 && !isBlank(script[i-1])) || i+2 >= len(script) || !isBlank(script[i+2]) {
			continue
		}
		word, rest, ok := shellWord(script[i+2:])
		if !ok {
			break
		}
		if name, value, ok := strings.Cut(word, ":"); ok && name != "" && !strings.ContainsAny(name, " \t") {
			value = strings.TrimLeft(value, " \t")
			if !slices.Contains(h.Values(name), value) { // gosmee writes Content-Type twice
				h.Add(name, value)
			}
		}
		i = len(script) - len(rest) - 1
	}
	return h
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' }

// shellWord reads the first word of s, after blanks, as a POSIX shell does
// without expansions: '…' literally, "…" with \ escaping $ ` " \ and a
// line break, \ outside quotes escaping the next byte (a line break:
// none). It returns the word and what follows it; ok is false when a quote
// is not closed or s holds no word.
func shellWord(s string) (word, rest string, ok bool) {
	i := 0
	for i < len(s) && isBlank(s[i]) {
		i++
	}
	var b strings.Builder
	started := false
	for i < len(s) {
		switch c := s[i]; {
		case isBlank(c):
			return b.String(), s[i:], started
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return "", "", false
			}
			b.WriteString(s[i+1 : i+1+j])
			i += j + 2
		case c == '"':
			i++
			for {
				if i >= len(s) {
					return "", "", false
				}
				if s[i] == '"' {
					i++
					break
				}
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
					if s[i+1] != '\n' {
						b.WriteByte(s[i+1])
					}
					i += 2
					continue
				}
				b.WriteByte(s[i])
				i++
			}
		case c == '\\' && i+1 == len(s):
			b.WriteByte(c) // a last backslash escapes nothing: itself, as sh reads it
			i++
		case c == '\\':
			if s[i+1] != '\n' {
				b.WriteByte(s[i+1])
			}
			i += 2
		default:
			b.WriteByte(c)
			i++
		}
		started = true
	}
	return b.String(), "", started
}
