package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/rest/backoff"
)

// modulePackages returns the directory of every Go package in the
// repository (both modules), relative and slash-separated: the directories
// holding a non-test .go file, outside testdata and node_modules.
func modulePackages(t *testing.T) []string {
	t.Helper()
	var pkgs []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", "node_modules", "dist", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dir := filepath.ToSlash(filepath.Dir(path))
			if dir != "." && !slices.Contains(pkgs, dir) {
				pkgs = append(pkgs, dir)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// repoPath matches a backticked path into the repository in Markdown:
// `internal/sse`, `relay/assets/`, `testdata/gosmee/`.
var repoPath = regexp.MustCompile("`((?:capture|cmd|delivery|internal|interop|proxy|relay|rest|testdata|webhooks)(?:/[A-Za-z0-9._-]+)*/?)`")

// TestArchitectureNamesEveryPackage keeps docs/ARCHITECTURE.md the map of
// the tree: every package is in it, and every path it or the CHANGELOG names
// exists.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	arch, err := os.ReadFile("docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := modulePackages(t)
	if len(pkgs) < 30 {
		t.Fatalf("found %d packages; the walk is broken", len(pkgs))
	}
	for _, p := range pkgs {
		if !strings.Contains(string(arch), "`"+p+"`") {
			t.Errorf("docs/ARCHITECTURE.md does not name the package `%s`", p)
		}
	}
	for _, file := range []string{"docs/ARCHITECTURE.md", "CHANGELOG.md"} {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range repoPath.FindAllStringSubmatch(string(text), -1) {
			path := m[1]
			// `internal/wire.Frame` names a package's identifier.
			if i := strings.LastIndex(path, "."); i > strings.LastIndex(path, "/") && i+1 < len(path) && 'A' <= path[i+1] && path[i+1] <= 'Z' {
				path = path[:i]
			}
			if _, err := os.Stat(filepath.FromSlash(path)); err != nil {
				t.Errorf("%s names `%s`, which is not in the tree", file, m[1])
			}
		}
	}
}

// TestReleaseVersionsAgree: the CHANGELOG's newest release and the version
// a GoReleaser snapshot gives `hookline version` (make release-check runs
// the snapshot's binary and checks it prints this) are the same release.
func TestReleaseVersionsAgree(t *testing.T) {
	changelog, err := os.ReadFile("CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## \[(\d+\.\d+\.\d+)\]`).FindSubmatch(changelog)
	if m == nil {
		t.Fatal("CHANGELOG.md has no released version (## [X.Y.Z])")
	}
	release := string(m[1])
	config, err := os.ReadFile(".goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := regexp.MustCompile(`(?m)^snapshot:\n\s+version_template:\s*"?([^"\n]+)"?`).FindSubmatch(config)
	if s == nil {
		t.Fatal(".goreleaser.yaml has no snapshot version_template")
	}
	if got, want := string(s[1]), release+"-next"; got != want {
		t.Errorf(".goreleaser.yaml's snapshot version is %q; the CHANGELOG's newest release is %s, so want %q", got, release, want)
	}
}

// TestReleaseTagsAgree: every build of the hookline binary uses the build
// tags a release is built with, so that the tests, make and hookline-bench
// run and measure the binary users get.
func TestReleaseTagsAgree(t *testing.T) {
	for _, name := range []string{".goreleaser.yaml", "Makefile", "cmd/hookline-bench/harness.go"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), testenv.ReleaseTags) {
			t.Errorf("%s does not build with %s (testenv.ReleaseTags, the tests' binary)", name, testenv.ReleaseTags)
		}
	}
}

// githubSlug is the anchor GitHub gives a heading: lower case, punctuation
// other than - and _ dropped, spaces to hyphens.
func githubSlug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsLinksResolve: every relative link of README.md and docs/ names a
// file that exists and, with #anchor, one of its headings.
func TestDocsLinksResolve(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files := append([]string{"README.md", "CHANGELOG.md"}, pages...)
	anchors := map[string]map[string]bool{}
	prose := map[string]string{}
	read := func(f string) {
		if _, ok := anchors[f]; ok {
			return
		}
		_, text := markdownBlocks(t, f)
		prose[f], anchors[f] = text, map[string]bool{}
		for _, line := range strings.Split(text, "\n") {
			if h := strings.TrimLeft(line, "#"); h != line && strings.HasPrefix(h, " ") {
				anchors[f][githubSlug(h)] = true
			}
		}
	}
	for _, f := range files {
		read(f)
		for _, m := range markdownLink.FindAllStringSubmatch(prose[f], -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(link, "#")
			target := f
			if path != "" {
				target = filepath.ToSlash(filepath.Join(filepath.Dir(f), path))
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s links to %s, which does not exist", f, link)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			read(target)
			if !anchors[target][anchor] {
				t.Errorf("%s links to %s: %s has no heading with that anchor", f, link, target)
			}
		}
	}
}

// TestReadmeIsOneSitting: the README stays short enough to read at once;
// the reference lives in docs/.
func TestReadmeIsOneSitting(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > 400 {
		t.Errorf("README.md has %d lines; keep it under 400 and move reference to docs/", n)
	}
}

// The wait the docs state for replay and deliveries before they give up on
// a target that is not up is the wait the code does: SafeRetry(false)'s
// retries, each a random wait below its backoff ceiling, at most their sum
// and on average half of it. Before, the docs said "about 20 s"; a user
// measured 11.8 s.
func TestDocsStateTheGiveUpWait(t *testing.T) {
	p := proxy.SafeRetry(false)
	var most time.Duration
	for n := range p.MaxAttempts - 1 {
		most += backoff.Ceiling(p.BaseDelay, p.MaxDelay, n)
	}
	want := fmt.Sprintf("at most %s, %s on average (%d retries", strconv.FormatFloat(most.Seconds(), 'f', -1, 64)+" s",
		strconv.FormatFloat((most/2).Round(time.Second).Seconds(), 'f', -1, 64)+" s", p.MaxAttempts-1)
	for _, doc := range []string{"docs/COMMANDS.md", "docs/PROXY.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		if text := strings.Join(strings.Fields(string(b)), " "); !strings.Contains(text, want) {
			t.Errorf("%s does not say how long replay waits for a target that is not up: want %q", doc, want)
		}
	}
}
