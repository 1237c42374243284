package ociimage

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hookline/hookline/internal/cli"
	"github.com/hookline/hookline/internal/testutil/testenv"
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
