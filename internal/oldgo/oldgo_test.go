// Package oldgo checks the rest module's promise to old Go: a consumer
// module whose go.mod says go 1.14 builds, vets and tests code that uses
// rest with the oldest Go this machine can install (Debian's golang-1.19),
// and `go mod tidy` leaves its go.mod as it was. Go 1.14 itself is not
// installable here; with the rest module's go 1.14 line (the compiler's
// language check) and rest/internal/apicheck (the library's), this is as close
// as the machine gets.
package oldgo

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookline/hookline/internal/testutil/testenv"
)

// oldGo returns Go 1.19's go command: $HOOKLINE_OLD_GO, or Debian's.
func oldGo(t *testing.T) string {
	if p := os.Getenv("HOOKLINE_OLD_GO"); p != "" {
		return p
	}
	const debian = "/usr/lib/go-1.19/bin/go"
	if _, err := os.Stat(debian); err != nil {
		testenv.Missing(t, "Go 1.19 (Debian's golang-1.19)", "install it with `sh internal/testutil/testenv/install.sh golang-1.19`")
	}
	return debian
}

const consumerMod = `module example.com/consumer

go 1.14

require github.com/hookline/hookline/rest v0.0.0-00010101000000-000000000000

replace github.com/hookline/hookline/rest => REST
`

// The consumer: a program written for sendgrid/rest, with the import path
// changed, and its test against a local server.
const consumerMain = `package main

import (
	"fmt"
	"log"
	"os"

	"github.com/hookline/hookline/rest"
)

func main() {
	resp, err := rest.Send(rest.Request{Method: rest.Get, BaseURL: os.Args[1], QueryParams: map[string]string{"q": "1"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.StatusCode, resp.Body)
}
`

const consumerTest = `package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hookline/hookline/rest"
)

func TestSend(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Method+" "+r.URL.RawQuery)
	}))
	defer srv.Close()
	c := &rest.Client{HTTPClient: &http.Client{Timeout: 5 * time.Second}, Retry: &rest.RetryPolicy{MaxAttempts: 2}}
	resp, err := c.Send(rest.Request{Method: rest.Post, BaseURL: srv.URL + "/x?a=b", QueryParams: map[string]string{"q": "1"}, Body: []byte("{}")})
	if err != nil || resp.StatusCode != 200 || resp.Body != "POST a=b&q=1" {
		t.Fatalf("Send = %+v, %v", resp, err)
	}
}
`

func TestRestWithGo119(t *testing.T) {
	if testing.Short() {
		t.Skip("builds with Go 1.19 (tens of seconds on a cold cache); run without -short")
	}
	goCmd := oldGo(t)
	rest, err := filepath.Abs(filepath.Join("..", "..", "rest"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mod := strings.Replace(consumerMod, "REST", rest, 1)
	for name, text := range map[string]string{"go.mod": mod, "main.go": consumerMain, "main_test.go": consumerTest} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = t.TempDir()
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(goCmd, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(),
			"GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local", "GOWORK=off",
			"GOCACHE="+filepath.Join(cache, "hookline-tools", "go1.19-build"), // Go 1.19's own build cache
			"GOPATH="+filepath.Join(dir, "gopath"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s with Go 1.19: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if v := run("version"); !strings.Contains(v, "go1.19") {
		t.Fatalf("%s is %s, want Go 1.19", goCmd, v)
	}
	run("mod", "tidy")
	run("vet", "./...")
	run("build", "./...")
	run("test", "./...")
	got, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != mod {
		t.Errorf("Go 1.19 changed the consumer's go.mod:\n%s\nwant it as written:\n%s", got, mod)
	}
}
