package capture

import (
	"os/exec"
	"strings"
	"testing"
)

// FuzzShellWord checks shellWord against sh itself on every input free of
// what a shell would expand or treat as an operator: the same word, or
// both refusing an unclosed quote.
//
//	go test ./capture -run '^$' -fuzz FuzzShellWord -fuzztime 1m
func FuzzShellWord(f *testing.F) {
	for _, s := range []string{`'it'\''s a value'`, `"a \"b\" \\ c"`, `plain`, `a\ b`, `'unclosed`, `"x'y"`, `'a'"b"c`, `""`} {
		f.Add(s)
	}
	if _, err := exec.LookPath("sh"); err != nil {
		f.Skip("no sh to compare with")
	}
	f.Fuzz(func(t *testing.T, s string) {
		if s == "" || strings.ContainsAny(s, "$`*?[]~{}!#&|;<>()\n\r\t =%\x00") || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
			return // expansions, operators, separators: not a word gosmee writes
		}
		word, rest, ok := shellWord(s)
		out, err := exec.Command("sh", "-c", "printf '%s\\0' "+s).Output()
		if err != nil {
			if ok && rest == "" {
				t.Errorf("sh refuses %q (%v), shellWord reads %q", s, err, word)
			}
			return
		}
		args := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		if !ok || rest != "" || len(args) != 1 || args[0] != word {
			t.Errorf("%q: sh reads %q, shellWord %q (rest %q, ok %v)", s, args, word, rest, ok)
		}
	})
}
