// Package testenv decides what a test does when a real peer it needs (node,
// chromium, redis-server) is not installed: under CI (CI=true) or with
// HOOKLINE_REQUIRE_ALL=1 the test fails loudly, because those runs promise
// every peer; on a contributor's machine it is skipped with one line naming
// the tool and the command that installs it (`make test` installs them all).
// It also holds what tests need around those peers: NodePackage, which
// finds an npm package of interop/ or skips; Poll, for a state a test can
// only look at; BuildHookline, the one build of the binary that tests run;
// and Race, for a test whose data is smaller under the race detector.
//
//	bin, err := exec.LookPath("redis-server")
//	if err != nil {
//		testenv.Missing(t, "redis-server", "install it with `sh internal/testutil/testenv/install.sh redis-server`")
//	}
package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// RequireAll reports whether every peer must be present: CI is true (as CI
// services set it) or HOOKLINE_REQUIRE_ALL is.
func RequireAll() bool {
	for _, name := range []string{"CI", "HOOKLINE_REQUIRE_ALL"} {
		if v, err := strconv.ParseBool(os.Getenv(name)); err == nil && v {
			return true
		}
	}
	return false
}

// Missing ends the test because tool is missing: it fails under RequireAll,
// and skips otherwise. how says how to install it.
func Missing(t testing.TB, tool, how string) {
	t.Helper()
	msg := tool + " is not installed; " + how + " (or run `make test`, which installs every peer)"
	if RequireAll() {
		t.Fatal(msg + " (required: CI or HOOKLINE_REQUIRE_ALL is set)")
	}
	t.Skip("skipped: " + msg)
}

// Chromium returns the path of a Chromium-based browser: HOOKLINE_CHROMIUM
// when set, else the first of chromium, chromium-browser and google-chrome
// on PATH; it ends the test (Missing, with how) when there is none.
func Chromium(t testing.TB, how string) string {
	t.Helper()
	if p := os.Getenv("HOOKLINE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	Missing(t, "chromium", how)
	return ""
}

// ModuleRoot is the directory of the hookline module's go.mod, found by
// walking up from the working directory (a test runs in its package's
// directory). It needs no go command on PATH: a test that empties PATH
// (to hide gh, say) still finds it.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modulePath(b) == "github.com/hookline/hookline" {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("not in the hookline module: no go.mod of github.com/hookline/hookline above the working directory")
		}
		dir = parent
	}
}

// modulePath returns the module path a go.mod declares.
func modulePath(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// Prometheus returns the paths of Debian's prometheus and promtool; it
// ends the test (Missing) when they are not installed.
func Prometheus(t testing.TB) (server, promtool string) {
	t.Helper()
	server, err1 := exec.LookPath("prometheus")
	promtool, err2 := exec.LookPath("promtool")
	if err1 != nil || err2 != nil {
		Missing(t, "prometheus", "install it with `sh internal/testutil/testenv/install.sh prometheus`")
	}
	return server, promtool
}

// Umoci returns the path of Debian's umoci (it unpacks an OCI image as a
// runtime would); it ends the test (Missing) when it is not installed.
func Umoci(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("umoci")
	if err != nil {
		Missing(t, "umoci", "install it with `sh internal/testutil/testenv/install.sh umoci`")
	}
	return p
}

// PollGuard is how long Poll waits before it fails the test: a hang, not a
// slow machine.
const PollGuard = 60 * time.Second

// Poll waits until cond holds, checking it every interval, and fails the
// test naming what it waited for after PollGuard. It is for state a test
// can only look at, never be told about: a real peer's (a browser's page,
// tmux's screen, Prometheus' answers, redis-server's keys, a process's
// files). What the test's own code does, it waits for with channels, and a
// command's output with relaytest.Buffer's Wait.
func Poll(t testing.TB, what string, interval time.Duration, cond func() bool) {
	t.Helper()
	if !Polled(interval, cond) {
		t.Fatalf("waited %v for %s", PollGuard, what)
	}
}

// Polled is Poll for a test that says more when it fails: it reports
// whether cond held within PollGuard.
func Polled(interval time.Duration, cond func() bool) bool {
	guard := time.NewTimer(PollGuard)
	defer guard.Stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-guard.C:
			return false
		}
	}
	return true
}

// BuildHookline returns the path of the hookline command built as a
// release is (CGO_ENABLED=0, a static binary, with ReleaseTags:
// .goreleaser.yaml), whatever the test binary was built with, so every
// test that runs the binary (and the image test, which needs it static)
// shares one build configuration, and `go vet` (run with CGO_ENABLED=0 by
// make check) has compiled its packages already. A test must not change
// the file.
//
// The binary is linked once for every test package of a run: it is kept in
// the temporary directory under the main package's build ID (which changes
// with any of its sources) and the build flags, and a package whose tests
// find it there uses it. go test does not keep what go build links, and
// the five packages whose tests run the binary each linked it (2.6 s of CPU
// each). Builds of other sources are removed after a day.
func BuildHookline(t testing.TB) string {
	t.Helper()
	bin, err := sharedHookline()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// ReleaseTags is the build tags flag a release is built with
// (.goreleaser.yaml): urfave/cli without its Markdown and man page
// writers. The Makefile and hookline-bench build with it too
// (TestReleaseTagsAgree).
const ReleaseTags = "-tags=urfave_cli_no_docs"

// sharedHookline is buildShared, once per test binary.
var sharedHookline = sync.OnceValues(buildShared)

func buildShared() (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	list := GoCommand("list", ReleaseTags, "-export", "-f", "{{.BuildID}}", ".")
	list.Dir = root
	id, err := list.Output()
	if err != nil {
		return "", fmt.Errorf("go list -export: %v%s", err, stderrOf(err))
	}
	sum := sha256.Sum256(append(id, os.Getenv("GOFLAGS")+"\x00"+runtime.GOOS+"/"+runtime.GOARCH...))
	cache := filepath.Join(os.TempDir(), fmt.Sprintf("hookline-test-bin-%d", os.Getuid()))
	dir := filepath.Join(cache, hex.EncodeToString(sum[:12]))
	bin := filepath.Join(dir, "hookline")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil {
		now := time.Now()
		os.Chtimes(dir, now, now) // in use: not pruned
		return bin, nil
	}
	tmp := fmt.Sprintf("%s.%d.partial", bin, os.Getpid())
	cmd := GoCommand("build", ReleaseTags, "-o", tmp, ".")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	pruneBuilds(cache, dir)
	return bin, nil
}

// pruneBuilds removes the builds in cache other than keep that no test has
// used for a day.
func pruneBuilds(cache, keep string) {
	entries, _ := os.ReadDir(cache)
	for _, e := range entries {
		dir := filepath.Join(cache, e.Name())
		if info, err := e.Info(); err == nil && dir != keep && time.Since(info.ModTime()) > 24*time.Hour {
			os.RemoveAll(dir)
		}
	}
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return "\n" + string(ee.Stderr)
	}
	return ""
}

// NodePackage returns the directory of the npm package name as `make
// interop-deps` installs it (interop/node_modules/NAME), or ends the test
// (Missing) when it is not installed: one line per missing package.
func NodePackage(t testing.TB, name string) string {
	t.Helper()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "interop", "node_modules", filepath.FromSlash(name))
	if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
		Missing(t, "the npm package "+name, "run `make interop-deps`")
	}
	return dir
}

// GoCommand is a go command a test runs (a build, go vet, go run), without
// cgo: as a release is built (.goreleaser.yaml), and as make check builds
// everything but the race run, so that it reuses that build instead of
// compiling the standard library and every package once more with cgo
// (the race run turns cgo on, and its environment is inherited).
func GoCommand(args ...string) *exec.Cmd {
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	return cmd
}

// Tools ends the test (Missing) unless every named program is on PATH: the
// POSIX shell and tools that a test's scripts run (sh, cat, sort,
// sleep...), which a PATH holding Go alone does not have.
func Tools(t testing.TB, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			Missing(t, name, "a POSIX shell and its tools on PATH (Debian's essential packages: dash, coreutils)")
		}
	}
}
