package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The release configuration is checked twice: `make release-check` runs
// `goreleaser check` (the tool validates the whole file), and these tests,
// which need only Go, build what the configuration would release, so a
// target that stops compiling fails `go test` long before a release.

// releaseBuild is the part of .goreleaser.yaml's first build these tests use.
type releaseBuild struct {
	goos, goarch, env, flags, ldflags []string
	main                              string
}

// readReleaseConfig reads .goreleaser.yaml.
func readReleaseConfig(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(".goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := parseYAML(string(data))
	if err != nil {
		t.Fatalf(".goreleaser.yaml: %v", err)
	}
	m, ok := doc.(map[string]any)
	if !ok {
		t.Fatalf(".goreleaser.yaml is not a mapping")
	}
	return m
}

func stringList(t *testing.T, v any, what string) []string {
	t.Helper()
	if v == nil {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		t.Fatalf(".goreleaser.yaml: %s is %T, want a list", what, v)
	}
	var out []string
	for _, x := range list {
		s, ok := x.(string)
		if !ok {
			t.Fatalf(".goreleaser.yaml: %s holds %T, want strings", what, x)
		}
		out = append(out, s)
	}
	return out
}

// firstBuild returns the config's single build.
func firstBuild(t *testing.T, cfg map[string]any) releaseBuild {
	t.Helper()
	builds, ok := cfg["builds"].([]any)
	if !ok || len(builds) != 1 {
		t.Fatalf(".goreleaser.yaml: want exactly one entry under builds, got %v", cfg["builds"])
	}
	b, ok := builds[0].(map[string]any)
	if !ok {
		t.Fatalf(".goreleaser.yaml: builds[0] is %T", builds[0])
	}
	if _, ok := b["ignore"]; ok {
		t.Fatalf(".goreleaser.yaml: builds[0].ignore is not understood by release_test.go; teach it first")
	}
	rb := releaseBuild{
		goos:    stringList(t, b["goos"], "goos"),
		goarch:  stringList(t, b["goarch"], "goarch"),
		env:     stringList(t, b["env"], "env"),
		flags:   stringList(t, b["flags"], "flags"),
		ldflags: stringList(t, b["ldflags"], "ldflags"),
	}
	rb.main, _ = b["main"].(string)
	if rb.main == "" {
		rb.main = "."
	}
	return rb
}

// renderTemplate fills the {{ .Field }} references of s from fields; a
// reference to another field fails the test.
func renderTemplate(t *testing.T, s string, fields map[string]string) string {
	t.Helper()
	re := regexp.MustCompile(`\{\{\s*\.(\w+)\s*\}\}`)
	out := re.ReplaceAllStringFunc(s, func(m string) string {
		name := re.FindStringSubmatch(m)[1]
		v, ok := fields[name]
		if !ok {
			t.Fatalf(".goreleaser.yaml: release_test.go cannot render {{.%s}} in %q", name, s)
		}
		return v
	})
	if strings.Contains(out, "{{") {
		t.Fatalf(".goreleaser.yaml: release_test.go cannot render %q", s)
	}
	return out
}

// goBuildArgs returns the go build arguments of b with its ldflags rendered.
func goBuildArgs(t *testing.T, b releaseBuild, fields map[string]string, out string) []string {
	t.Helper()
	var ld []string
	for _, f := range b.ldflags {
		ld = append(ld, renderTemplate(t, f, fields))
	}
	args := append([]string{"build"}, b.flags...)
	return append(args, "-ldflags="+strings.Join(ld, " "), "-o", out, b.main)
}

var testReleaseFields = map[string]string{
	"Version": "1.2.3-test",
	"Commit":  "0123456789abcdef0123456789abcdef01234567",
	"Date":    "2026-01-02T03:04:05Z",
}

// The configuration releases what the issue asks for, with the files the
// archives name present in the repository.
func TestReleaseConfig(t *testing.T) {
	cfg := readReleaseConfig(t)
	if v, _ := cfg["version"].(string); v != "2" {
		t.Errorf("version = %q, want 2 (GoReleaser v2 schema)", v)
	}
	b := firstBuild(t, cfg)
	for _, want := range []string{"linux", "darwin", "windows"} {
		if !slices.Contains(b.goos, want) {
			t.Errorf("builds[0].goos = %v, want %s in it", b.goos, want)
		}
	}
	for _, want := range []string{"amd64", "arm64"} {
		if !slices.Contains(b.goarch, want) {
			t.Errorf("builds[0].goarch = %v, want %s in it", b.goarch, want)
		}
	}
	if !slices.Contains(b.env, "CGO_ENABLED=0") {
		t.Errorf("builds[0].env = %v, want CGO_ENABLED=0", b.env)
	}
	ld := strings.Join(b.ldflags, " ")
	for _, want := range []string{
		"-X github.com/hookline/hookline/internal/cli.version={{.Version}}",
		"-X github.com/hookline/hookline/internal/cli.commit={{.Commit}}",
		"-X github.com/hookline/hookline/internal/cli.date={{.Date}}",
	} {
		if !strings.Contains(ld, want) {
			t.Errorf("builds[0].ldflags = %q, want %q in them", ld, want)
		}
	}

	archives, _ := cfg["archives"].([]any)
	if len(archives) == 0 {
		t.Fatal("no archives")
	}
	for i, a := range archives {
		files := stringList(t, a.(map[string]any)["files"], "archives.files")
		for _, want := range []string{"README.md", "LICENSE", "CHANGELOG.md"} {
			if !slices.Contains(files, want) {
				t.Errorf("archives[%d].files = %v, want %s in them", i, files, want)
			}
			if _, err := os.Stat(want); err != nil {
				t.Errorf("archives[%d] ships %s: %v", i, want, err)
			}
		}
	}
	for _, section := range []string{"checksum", "changelog"} {
		if _, ok := cfg[section]; !ok {
			t.Errorf("no %s section", section)
		}
	}
}

// Every goos/goarch of the configuration compiles, the way GoReleaser
// builds it (its env, flags and ldflags). Two builds run at once: each one
// already uses every core for its packages.
func TestReleaseTargetsBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles every release target; skipped with -short")
	}
	b := firstBuild(t, readReleaseConfig(t))
	if len(b.goos)*len(b.goarch) == 0 {
		t.Fatalf("no targets: goos %v, goarch %v", b.goos, b.goarch)
	}
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for _, goos := range b.goos {
		for _, goarch := range b.goarch {
			args := goBuildArgs(t, b, testReleaseFields, os.DevNull)
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				cmd := exec.Command("go", args...)
				cmd.Env = append(os.Environ(), b.env...)
				cmd.Env = append(cmd.Env, "GOOS="+goos, "GOARCH="+goarch)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("GOOS=%s GOARCH=%s %s go %s: %v\n%s",
						goos, goarch, strings.Join(b.env, " "), strings.Join(args, " "), err, out)
				}
			})
		}
	}
	wg.Wait()
}

// A binary built with the configuration's ldflags prints the injected
// version, commit and date.
func TestReleaseVersionLdflags(t *testing.T) {
	b := firstBuild(t, readReleaseConfig(t))
	bin := filepath.Join(t.TempDir(), "hookline")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	args := goBuildArgs(t, b, testReleaseFields, bin)
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), b.env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("hookline version: %v\n%s", err, out)
	}
	for _, want := range []string{
		"hookline " + testReleaseFields["Version"] + "\n",
		"commit: " + testReleaseFields["Commit"] + "\n",
		"built:  " + testReleaseFields["Date"] + "\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("hookline version printed\n%s\nwant the line %q", out, want)
		}
	}
	out, err = exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "hookline "+testReleaseFields["Version"]+"\n") {
		t.Errorf("hookline --version = %q, %v; want it to start with hookline %s", out, err, testReleaseFields["Version"])
	}
}

// parseYAML reads the block-style YAML subset .goreleaser.yaml is written
// in: mappings, sequences (of scalars or of mappings), plain and quoted
// scalars, flow sequences of scalars, "|" and "|-" block scalars and
// comments. Anchors, tags and multi-document files are not supported. The
// project avoids a YAML dependency for one test; `goreleaser check`
// validates the real thing.
func parseYAML(src string) (any, error) {
	p := &yamlParser{}
	for i, raw := range strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n") {
		text := strings.TrimRight(raw, " \t")
		trimmed := strings.TrimLeft(text, " ")
		if strings.Contains(text[:len(text)-len(trimmed)], "\t") {
			return nil, fmt.Errorf("line %d: tab in indentation", i+1)
		}
		p.lines = append(p.lines, yamlLine{n: i + 1, indent: len(text) - len(trimmed), text: trimmed, raw: text})
	}
	p.skipBlank()
	if p.pos >= len(p.lines) {
		return nil, fmt.Errorf("empty document")
	}
	v, err := p.block(p.lines[p.pos].indent)
	if err != nil {
		return nil, err
	}
	if p.skipBlank(); p.pos < len(p.lines) {
		return nil, fmt.Errorf("line %d: unexpected indentation", p.lines[p.pos].n)
	}
	return v, nil
}

type yamlLine struct {
	n, indent int
	text, raw string
}

type yamlParser struct {
	lines []yamlLine
	pos   int
}

// skipBlank moves past empty and comment-only lines.
func (p *yamlParser) skipBlank() {
	for p.pos < len(p.lines) && (p.lines[p.pos].text == "" || strings.HasPrefix(p.lines[p.pos].text, "#")) {
		p.pos++
	}
}

// block parses the mapping or sequence whose lines start at indent.
func (p *yamlParser) block(indent int) (any, error) {
	p.skipBlank()
	if p.pos < len(p.lines) && isSeqItem(p.lines[p.pos].text) {
		return p.sequence(indent)
	}
	return p.mapping(indent, nil)
}

func isSeqItem(text string) bool { return text == "-" || strings.HasPrefix(text, "- ") }

func (p *yamlParser) sequence(indent int) ([]any, error) {
	var out []any
	for p.skipBlank(); p.pos < len(p.lines); p.skipBlank() {
		l := p.lines[p.pos]
		if l.indent < indent || (l.indent == indent && !isSeqItem(l.text)) {
			break
		}
		if l.indent > indent {
			return nil, fmt.Errorf("line %d: want a sequence item at column %d", l.n, indent+1)
		}
		rest := strings.TrimLeft(strings.TrimPrefix(l.text, "-"), " ")
		if rest == "" {
			p.pos++
			v, err := p.nested(indent)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
			continue
		}
		if _, _, ok := splitKey(rest); ok {
			// "- key: value": a mapping whose keys line up with key.
			itemIndent := l.indent + len(l.text) - len(rest)
			p.lines[p.pos] = yamlLine{n: l.n, indent: itemIndent, text: rest, raw: l.raw}
			m, err := p.mapping(itemIndent, nil)
			if err != nil {
				return nil, err
			}
			out = append(out, m)
			continue
		}
		p.pos++
		v, err := scalar(rest, l.n)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// nested parses the value under a "key:" or "-" line at indent: a more
// indented block, or (for a key) a sequence at the same indent.
func (p *yamlParser) nested(indent int) (any, error) {
	p.skipBlank()
	if p.pos >= len(p.lines) {
		return nil, nil
	}
	l := p.lines[p.pos]
	if l.indent > indent || (l.indent == indent && isSeqItem(l.text)) {
		return p.block(l.indent)
	}
	return nil, nil
}

func (p *yamlParser) mapping(indent int, m map[string]any) (map[string]any, error) {
	if m == nil {
		m = map[string]any{}
	}
	for p.skipBlank(); p.pos < len(p.lines); p.skipBlank() {
		l := p.lines[p.pos]
		if l.indent < indent || (l.indent == indent && isSeqItem(l.text)) {
			break
		}
		if l.indent > indent {
			return nil, fmt.Errorf("line %d: unexpected indentation", l.n)
		}
		key, value, ok := splitKey(l.text)
		if !ok {
			return nil, fmt.Errorf("line %d: want key: value, got %q", l.n, l.text)
		}
		if _, dup := m[key]; dup {
			return nil, fmt.Errorf("line %d: duplicate key %q", l.n, key)
		}
		p.pos++
		var v any
		var err error
		switch value {
		case "":
			v, err = p.nested(indent)
		case "|", "|-":
			v = p.literal(indent, value == "|")
		default:
			v, err = scalar(value, l.n)
		}
		if err != nil {
			return nil, err
		}
		m[key] = v
	}
	return m, nil
}

// literal reads the lines of a block scalar more indented than indent.
func (p *yamlParser) literal(indent int, keepNewline bool) string {
	var lines []string
	blockIndent := -1
	for ; p.pos < len(p.lines); p.pos++ {
		l := p.lines[p.pos]
		if l.text != "" && l.indent <= indent {
			break
		}
		if blockIndent < 0 && l.text != "" {
			blockIndent = l.indent
		}
		if len(l.raw) >= blockIndent && blockIndent >= 0 {
			lines = append(lines, l.raw[blockIndent:])
		} else {
			lines = append(lines, "")
		}
	}
	s := strings.TrimRight(strings.Join(lines, "\n"), "\n")
	if keepNewline {
		s += "\n"
	}
	return s
}

// splitKey splits "key: value" (the value without its comment).
func splitKey(text string) (key, value string, ok bool) {
	if text == "" || text[0] == '"' || text[0] == '\'' || text[0] == '[' {
		return "", "", false
	}
	i := strings.Index(text+" ", ": ")
	if i < 0 {
		if !strings.HasSuffix(text, ":") {
			return "", "", false
		}
		i = len(text) - 1
	}
	key = text[:i]
	if strings.ContainsAny(key, "#{}") {
		return "", "", false
	}
	value = strings.TrimSpace(stripComment(text[i+1:]))
	return key, value, true
}

// stripComment removes a " #" comment outside quotes.
func stripComment(s string) string {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#' && (i == 0 || s[i-1] == ' '):
			return s[:i]
		}
	}
	return s
}

// scalar reads a scalar or a flow sequence of scalars.
func scalar(s string, line int) (any, error) {
	s = strings.TrimSpace(stripComment(s))
	switch {
	case strings.HasPrefix(s, "["):
		if !strings.HasSuffix(s, "]") {
			return nil, fmt.Errorf("line %d: unterminated flow sequence", line)
		}
		var out []any
		for _, item := range strings.Split(s[1:len(s)-1], ",") {
			if item = strings.TrimSpace(item); item != "" {
				v, err := scalar(item, line)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
		}
		return out, nil
	case strings.HasPrefix(s, `"`):
		if len(s) < 2 || !strings.HasSuffix(s, `"`) {
			return nil, fmt.Errorf("line %d: unterminated string", line)
		}
		r := strings.NewReplacer(`\\`, `\`, `\"`, `"`, `\n`, "\n", `\t`, "\t")
		return r.Replace(s[1 : len(s)-1]), nil
	case strings.HasPrefix(s, "'"):
		if len(s) < 2 || !strings.HasSuffix(s, "'") {
			return nil, fmt.Errorf("line %d: unterminated string", line)
		}
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'"), nil
	case strings.HasPrefix(s, "{"), strings.HasPrefix(s, "&"), strings.HasPrefix(s, "*"), strings.HasPrefix(s, "!"):
		return nil, fmt.Errorf("line %d: %q is outside the YAML subset release_test.go reads", line, s)
	}
	return s, nil
}

func TestParseYAML(t *testing.T) {
	src := `# comment
version: 2
a:
  - x   # trailing
  - "y # not a comment"
  - 'it''s'
b:
- id: one
  list: [p, q]
  nested:
    k: v
- id: two
c: |-
  line 1
    line 2
d: "{{ .Version }}"
`
	got, err := parseYAML(src)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"version": "2",
		"a":       []any{"x", "y # not a comment", "it's"},
		"b": []any{
			map[string]any{"id": "one", "list": []any{"p", "q"}, "nested": map[string]any{"k": "v"}},
			map[string]any{"id": "two"},
		},
		"c": "line 1\n  line 2",
		"d": "{{ .Version }}",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseYAML =\n%v\nwant\n%v", got, want)
	}
	for _, bad := range []string{"a:\n  b: 1\n   c: 2\n", "a: [1, 2\n", "a: 1\na: 2\n", "a:\n\t- x\n", "k: &anchor v\n"} {
		if _, err := parseYAML(bad); err == nil {
			t.Errorf("parseYAML(%q) = nil error, want one", bad)
		}
	}
}
