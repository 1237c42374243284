package capture

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
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
// (where the seconds repeat the month, gosmee's own layout); when neither
// parses, the file's modification time stands in.
var (
	gosmeeHeader      = regexp.MustCompile(`-H '([^':]+): ([^']*)'`)
	gosmeeContentType = regexp.MustCompile(`-H "Content-Type: ([^"]*)"`)
	gosmeeLayouts     = []string{"20060102T15h04", "2006-01-02T15.04.01.000"}
)

// readGosmee returns the delivery of gosmee's files: body is the .json at
// path, script the .sh beside it.
func readGosmee(path string, body, script []byte) (File, error) {
	if bytes.Contains(script, []byte(scriptMark)) {
		// hookline's own script beside a damaged capture: not gosmee's.
		return File{}, fmt.Errorf("%w: not a capture, and the script beside it is hookline's", ErrMalformed)
	}
	h := http.Header{}
	for _, m := range gosmeeHeader.FindAllSubmatch(script, -1) {
		h.Add(string(m[1]), string(m[2]))
	}
	if m := gosmeeContentType.FindSubmatch(script); m != nil && len(m[1]) > 0 {
		h.Set("Content-Type", string(m[1]))
	}
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
				d.ReceivedAt, prefix = t, strings.TrimSuffix(base[:len(base)-len(layout)], "-")
				break
			}
		}
	}
	if d.ReceivedAt.IsZero() {
		if st, err := os.Stat(path); err == nil {
			d.ReceivedAt = st.ModTime()
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
