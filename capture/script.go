package capture

import (
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
)

// scriptMark is in every script WriteScript writes.
const scriptMark = "written by hookline"

// scriptSkip are the headers a script does not send: curl writes its own
// Host, Content-Length and connection headers.
var scriptSkip = map[string]bool{
	"Host": true, "Content-Length": true, "Connection": true, "Keep-Alive": true,
	"Transfer-Encoding": true, "Te": true, "Trailer": true, "Upgrade": true,
	"Proxy-Connection": true, "Proxy-Authorization": true,
}

// WriteScript writes, beside the capture file at path (as written by
// Write), `<name>.body` with d's exact body and `<name>.sh`, a POSIX shell
// script that re-sends d with curl: its method, headers (those Write keeps,
// but Host, Content-Length and connection headers, which curl writes) and
// body byte for byte (--data-binary, never -d, which strips line breaks and
// so breaks signatures), to the URL given as its first argument, else
// target (if not empty).
// It returns the script's path.
func WriteScript(path string, d Delivery, target string) (string, error) {
	base := strings.TrimSuffix(path, ".json")
	if err := os.WriteFile(base+".body", d.Body, 0o600); err != nil {
		return "", fmt.Errorf("saving the body of delivery %s: %w", d.ID, err)
	}
	method := d.Method
	if method == "" {
		method = http.MethodPost
	}
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# Re-sends %s delivery %s byte for byte (%s).\n", shellComment(d.Event), shellComment(d.ID), scriptMark)
	fmt.Fprintf(&b, "# Usage: %s [URL]\nset -eu\n", shellComment(base+".sh"))
	if target != "" {
		fmt.Fprintf(&b, "url=${1:-%s}\n", shellQuote(target))
	} else {
		b.WriteString("url=${1:?give the URL to send the delivery to}\n")
	}
	fmt.Fprintf(&b, "exec curl -sS -X %s \\\n", shellQuote(method))
	names := make([]string, 0, len(d.Headers))
	for k := range d.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if scriptSkip[http.CanonicalHeaderKey(k)] {
			continue
		}
		for _, v := range d.Headers[k] {
			fmt.Fprintf(&b, "  -H %s \\\n", shellQuote(k+": "+v))
		}
	}
	// Expect: no 100-continue round trip for a large body; the query as
	// received.
	fmt.Fprintf(&b, "  -H 'Expect:' \\\n  --data-binary @\"$(dirname \"$0\")\"/%s \\\n", shellQuote(baseName(base)+".body"))
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

// shellQuote quotes s for a POSIX shell: single quotes, each ' written '\”.
func shellQuote(s string) string { return "'" + shellQuoteInner(s) + "'" }

func shellQuoteInner(s string) string { return strings.ReplaceAll(s, "'", `'\''`) }

// shellComment makes s safe on one comment line.
func shellComment(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '_'
		}
		return r
	}, s)
}

func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}
