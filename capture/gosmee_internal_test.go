package capture

import "testing"

// FuzzGosmeeHeaders: any script beside a .json file, however made, is read
// without a panic (the shell parser and its expansion see untrusted bytes).
//
//	go test ./capture -run '^$' -fuzz FuzzGosmeeHeaders -fuzztime 1m
func FuzzGosmeeHeaders(f *testing.F) {
	for _, s := range []string{
		"curl -sSi -H 'X-Note: it'\\''s' -H \"Content-Type: application/json\" -d @./a.json ${targetURL}",
		"curl -H \"X: $(id)\" -H \"Y: <(id)\" -H X:$HOME -H 'Z: *' <(echo) `id` $((1/0)) ${a[1]}",
		"-H", "curl -H 'unclosed", "f() { curl -H 'A: b'; }; f | cat &",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, script string) {
		gosmeeHeaders(script)
	})
}
