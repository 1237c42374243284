package capture

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

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
// word is read as the shell reads it (mvdan.cc/sh): gosmee quotes values
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

// curlArgs expands a word of gosmee's script into the argument curl gets,
// with no variables set and nothing run: a word that would run something
// is not a header gosmee wrote.
var curlArgs = &expand.Config{
	Env:       expand.ListEnviron(),
	ProcSubst: func(*syntax.ProcSubst) (string, error) { return "", errors.New("process substitution") },
}

// gosmeeHeaders returns the headers of the -H arguments of the curl
// commands in gosmee's script, each word read as the shell reads it
// (mvdan.cc/sh's parser); nil when the script does not parse.
func gosmeeHeaders(script string) http.Header {
	f, err := syntax.NewParser().Parse(strings.NewReader(script), "")
	if err != nil {
		return nil
	}
	h := http.Header{}
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok {
			return true
		}
		for i := 0; i+1 < len(call.Args); i++ {
			if call.Args[i].Lit() != "-H" {
				continue
			}
			i++
			fields, err := expand.Fields(curlArgs, call.Args[i])
			if err != nil || len(fields) != 1 {
				continue // not a literal header: not one gosmee writes
			}
			word := fields[0]
			if name, value, ok := strings.Cut(word, ":"); ok && name != "" && !strings.ContainsAny(name, " \t") {
				value = strings.TrimLeft(value, " \t")
				if !slices.Contains(h.Values(name), value) { // gosmee writes Content-Type twice
					h.Add(name, value)
				}
			}
		}
		return true
	})
	return h
}
