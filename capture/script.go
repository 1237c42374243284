package capture

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hookline/hookline/delivery"
	"github.com/hookline/hookline/internal/httpx"
)

// scriptMark is in every script WriteScript writes.
const scriptMark = "written by hookline"

// WriteScript writes, beside the capture file at path (as written by
// Write), `<name>.body` with d's exact body and `<name>.sh`, a POSIX shell
// script that re-sends d with curl: its method, the headers hookline's
// forwarder sends (httpx.Forwardable: not Host, Content-Length nor
// hop-by-hop ones, which curl writes itself), and its body byte for byte
// (--data-binary, never -d, which strips line breaks and so breaks
// signatures), to the URL given as its first argument, else target (if
// not empty). It returns the script's path.
func WriteScript(path string, d *delivery.Delivery, target string) (string, error) {
	base := strings.TrimSuffix(path, ".json")
	if err := os.WriteFile(base+".body", d.Body, 0o600); err != nil {
		return "", fmt.Errorf("saving the body of delivery %s: %w", d.ID, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# Re-sends %s delivery %s byte for byte (%s).\n", shellComment(d.Event), shellComment(d.ID), scriptMark)
	fmt.Fprintf(&b, "# Usage: %s [URL]\nset -eu\n", shellComment(base+".sh"))
	if target != "" {
		fmt.Fprintf(&b, "url=${1:-%s}\n", shellQuote(target))
	} else {
		b.WriteString("url=${1:?give the URL to send the delivery to}\n")
	}
	b.WriteString("exec ")
	writeCurl(&b, d)
	// Expect: no 100-continue round trip for a large body; the query as
	// received.
	fmt.Fprintf(&b, "  -H 'Expect:' \\\n  --data-binary @\"$(dirname \"$0\")\"/%s \\\n", shellQuote(filepath.Base(base)+".body"))
	if d.Query != "" {
		fmt.Fprintf(&b, "  \"$url\"%s\n", shellQuote("?"+d.Query))
	} else {
		b.WriteString("  \"$url\"\n")
	}
	if err := os.WriteFile(base+".sh", []byte(b.String()), 0o700); err != nil {
		return "", fmt.Errorf("saving the script of delivery %s: %w", d.ID, err)
	}
	return base + ".sh", nil
}

// writeCurl writes the start of a curl command that sends d: its method
// and the headers hookline's forwarder sends, one per line.
func writeCurl(b *strings.Builder, d *delivery.Delivery) {
	method := d.Method
	if method == "" {
		method = http.MethodPost
	}
	fmt.Fprintf(b, "curl -sS -X %s \\\n", shellQuote(method))
	h := httpx.Forwardable(d.Headers)
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range h[k] {
			fmt.Fprintf(b, "  -H %s \\\n", shellQuote(k+": "+v))
		}
	}
}

// Curl returns a shell command that sends d to url byte for byte, its body
// inline (printf with octal escapes for every byte that is not printable
// ASCII, so that a copied command keeps binary bodies and line breaks), as
// WriteScript's script does from a file.
func Curl(d *delivery.Delivery, url string) string {
	var b strings.Builder
	b.WriteString("printf '")
	for _, c := range d.Body {
		switch {
		case c == '\\' || c == '%' || c == '\'' || c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteString("' | ")
	writeCurl(&b, d)
	u := url
	if d.Query != "" {
		u += "?" + d.Query
	}
	fmt.Fprintf(&b, "  -H 'Expect:' --data-binary @- %s\n", shellQuote(u))
	return b.String()
}

// shellQuote quotes s for a POSIX shell: single quotes, each ' written '\”.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// shellComment makes s safe on one comment line.
func shellComment(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '_'
		}
		return r
	}, s)
}
