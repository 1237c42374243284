package ociimage

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/hookline/hookline/internal/cli"
	"github.com/hookline/hookline/internal/testutil/githubtest"
	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/relay"
	"github.com/hookline/hookline/webhooks"
)

// TestImageRunsFromItsFilesystem builds the image from a static hookline,
// unpacks it with Debian's umoci as a container runtime would, checks the
// filesystem (the binary, the non-root user, /data owned by it, no shell)
// and runs its entrypoint from the unpacked root (chroot, as the image's
// user): serve starts, takes a POST and streams it. A real runtime
// (podman) cannot run on this machine; that part skips, saying why.
func TestImageRunsFromItsFilesystem(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds hookline and an image")
	}
	umoci := testenv.Umoci(t)
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (to unpack with owners and chroot)", "run the test as root")
	}
	dir := t.TempDir()
	bin := testenv.BuildHookline(t) // static, as a release is
	layout := filepath.Join(dir, "image")
	if err := Build(layout, bin, runtime.GOARCH, "test"); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "bundle")
	if out, err := exec.Command(umoci, "unpack", "--image", layout+":test", bundle).CombinedOutput(); err != nil {
		t.Fatalf("umoci unpack: %v\n%s", err, out)
	}
	rootfs := filepath.Join(bundle, "rootfs")
	passwd, _ := os.ReadFile(filepath.Join(rootfs, "etc", "passwd"))
	if !strings.Contains(string(passwd), fmt.Sprintf("hookline:x:%d:%d:", UID, GID)) {
		t.Errorf("/etc/passwd:\n%s", passwd)
	}
	if fi, err := os.Stat(filepath.Join(rootfs, "data")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != UID {
		t.Errorf("/data: %v, want a directory owned by %d", err, UID)
	}
	for _, shell := range []string{"bin/sh", "bin/bash", "usr/bin/env"} {
		if _, err := os.Stat(filepath.Join(rootfs, shell)); err == nil {
			t.Errorf("the image has /%s; it should hold the binary alone", shell)
		}
	}
	config, _ := os.ReadFile(filepath.Join(bundle, "config.json"))
	if !strings.Contains(string(config), `"/hookline"`) || !strings.Contains(string(config), fmt.Sprintf(`"uid": %d`, UID)) {
		t.Errorf("the runtime config lacks the entrypoint or the user:\n%.2000s", config)
	}

	// The entrypoint, from the unpacked root, as the image's user.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	serve := exec.CommandContext(ctx, "chroot", fmt.Sprintf("--userspec=%d:%d", UID, GID), rootfs, "/hookline", "serve", "--addr", addr, "--data-dir", "/data")
	out, _ := serve.StdoutPipe()
	var serveLog strings.Builder
	serve.Stderr = &serveLog
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("serve's log:\n%s", serveLog.String())
		}
	})
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer serve.Wait()
	defer cancel()
	channel := ""
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "new channel: "); ok {
			channel = strings.TrimSpace(rest)
			break
		}
	}
	go io.Copy(io.Discard, out)
	if channel == "" {
		t.Fatal("serve printed no channel")
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, channel, nil)
	req.Header.Set("Accept", "text/event-stream")
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	post, err := http.Post(channel, "application/json", strings.NewReader(`{"zen":"from the image"}`))
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	got := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stream.Body)
		s.Buffer(nil, 1<<20)
		for s.Scan() {
			if strings.HasPrefix(s.Text(), "data:") && strings.Contains(s.Text(), "from the image") {
				got <- s.Text()
				return
			}
		}
	}()
	select {
	case <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the delivery never came on the stream")
	}
	if fi, err := os.Stat(filepath.Join(rootfs, "data", "relay.db")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != UID {
		t.Errorf("/data/relay.db: %v, want it written by the image's user", err)
	}

	t.Run("https", func(t *testing.T) { imageSpeaksHTTPS(t, rootfs) })

	t.Run("podman", func(t *testing.T) {
		if _, err := exec.LookPath("podman"); err != nil {
			t.Skip("no container runtime here: podman cannot run on this machine (no permission to set rlimits, cgroups in hybrid mode); the unpacked image was run with chroot instead")
		}
		t.Skip("podman is installed, but on this machine it cannot run containers (no permission to set rlimits, cgroups in hybrid mode)")
	})
}

// TestDeployExamples: deploy/'s compose and Kubernetes files are YAML, run
// the image's serve (its flags, checked against hookline serve's), and
// probe /healthz.
func TestDeployExamples(t *testing.T) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	var help strings.Builder
	cli.Run(t.Context(), []string{"hookline", "serve", "--help"}, strings.NewReader(""), &help, &help)
	serveHelp := help.String()
	for _, name := range []string{"compose.yaml", "kubernetes.yaml"} {
		b, err := os.ReadFile(filepath.Join(root, "deploy", name))
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		docs := 0
		for {
			var doc map[string]any
			if err := dec.Decode(&doc); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			docs++
		}
		text := string(b)
		for _, m := range regexp.MustCompile(`"(--[a-z-]+)"`).FindAllStringSubmatch(text, -1) {
			if m[1] != "--appendonly" && m[1] != "--appendfsync" && m[1] != "--maxmemory-policy" && !strings.Contains(serveHelp, m[1]+" ") {
				t.Errorf("%s: %s is not a flag of hookline serve", name, m[1])
			}
		}
		if docs == 0 || !strings.Contains(text, `"serve", "--addr", ":8080"`) {
			t.Errorf("%s: %d documents; want the image's serve", name, docs)
		}
		if name == "kubernetes.yaml" && (!strings.Contains(text, "path: /healthz") || !strings.Contains(text, "replicas: 2") || !strings.Contains(text, fmt.Sprint(UID))) {
			t.Errorf("%s: want two replicas, readiness on /healthz, the image's user", name)
		}
	}
}

// imageSpeaksHTTPS checks the image's CA roots, then runs forward and
// deliveries from the unpacked root, as the image's user, against servers
// on https: a relay whose certificate chains to a root the image trusts
// (the test's own CA, added to the image's bundle as a user adds theirs)
// and a fake of GitHub's API. forward receives a delivery and verifies
// it; deliveries lists a webhook's deliveries.
func imageSpeaksHTTPS(t *testing.T, rootfs string) {
	bundlePath := filepath.Join(rootfs, CABundle)
	pemBytes, err := os.ReadFile(bundlePath)
	if err != nil {
		t.Fatalf("the image has no CA roots: %v", err)
	}
	roots := 0
	for rest := pemBytes; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			t.Errorf("%s: root %d: %v", CABundle, roots+1, err)
		}
		roots++
	}
	if roots < 100 {
		t.Fatalf("%s holds %d roots, want Mozilla's (over 100)", CABundle, roots)
	}
	t.Logf("%s: %d roots", CABundle, roots)

	// Servers on https with httptest's certificate, whose own CA it is:
	// added to the image's bundle, as a user adds a private CA.
	const secret = "image-secret"
	rl, err := relay.New(relay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	relaySrv := httptest.NewTLSServer(rl)
	t.Cleanup(relaySrv.Close)
	t.Cleanup(rl.Close)
	gh := githubtest.New(t, "")
	ghURL, _ := url.Parse(gh.WebURL)
	apiSrv := httptest.NewTLSServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(ghURL) }})
	t.Cleanup(apiSrv.Close)
	f, err := os.OpenFile(bundlePath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	pem.Encode(f, &pem.Block{Type: "CERTIFICATE", Bytes: relaySrv.Certificate().Raw})
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	got := make(chan []byte, 4)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- b
	}))
	t.Cleanup(target.Close)
	// The image's environment (its config's Env, its user's home).
	inImage := func(ctx context.Context, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "chroot", append([]string{fmt.Sprintf("--userspec=%d:%d", UID, GID), rootfs, "/hookline"}, args...)...)
		cmd.Env = []string{"HOME=/data", "HOOKLINE_NO_COLOR=1", "GITHUB_TOKEN=" + githubtest.Token}
		return cmd
	}

	channel := relaySrv.URL + "/image-https"
	ctx, cancel := context.WithCancel(t.Context())
	forward := inImage(ctx, "forward", "--url", channel, "--target", target.URL, "--secret", secret, "--json")
	var out, errOut relaytest.Buffer // read while forward writes
	forward.Stdout, forward.Stderr = &out, &errOut
	if err := forward.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		forward.Wait()
		if t.Failed() {
			t.Logf("forward's output:\n%s%s", out.String(), errOut.String())
		}
	})
	if !testenv.Polled(20*time.Millisecond, func() bool { return rl.Stats().Subscribers == 1 }) {
		t.Fatalf("forward in the image did not connect to the relay over https")
	}
	body := []byte(`{"zen":"over https, from the image"}`)
	req, _ := http.NewRequest(http.MethodPost, channel, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "ping")
	req.Header.Set("X-GitHub-Delivery", "image-https-1")
	sig, err := webhooks.Sign(secret, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Hub-Signature-256", sig)
	resp, err := relaySrv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case b := <-got:
		if !bytes.Equal(b, body) {
			t.Errorf("the target got %q, want %q", b, body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the delivery never reached the target")
	}
	if !testenv.Polled(20*time.Millisecond, func() bool { return strings.Contains(out.String(), `"verification":"verified"`) }) {
		t.Errorf("forward did not report the delivery verified: %s", out.String())
	}

	// deliveries, against GitHub's API on https.
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(hook.Close)
	id := gh.AddHook(githubtest.Hook{Owner: "/repos/octo/hello", URL: hook.URL, Events: []string{"*"}, Active: true})
	if _, err := gh.Deliver(id, "issues", []byte(`{"action":"opened"}`)); err != nil {
		t.Fatal(err)
	}
	list, err := inImage(t.Context(), "deliveries", "--repo", "octo/hello", "--github-api", apiSrv.URL).CombinedOutput()
	if err != nil || !strings.Contains(string(list), "issues.opened") {
		t.Errorf("deliveries in the image: %v\n%s", err, list)
	}
}
