package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/redistest"
	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/internal/testutil/testenv"
)

// docs/DEPLOY.md's replica runs as written: its redis.conf block configures
// a real redis-server (persistence, memory policy, the relay's ACL user),
// and its `hookline serve` command, with only the listen address and
// Redis's host changed to this machine's, takes a POST and streams it back
// through that user. Before, the page's command lacked --trusted-proxy and
// nothing ran it.
func TestDeployCommands(t *testing.T) {
	blocks, _ := markdownBlocks(t, "docs/DEPLOY.md")
	var conf []string
	var serve *shellCommand
	for _, b := range blocks {
		switch {
		case b.lang == "conf" && strings.HasPrefix(b.text, "# redis.conf"):
			for _, line := range strings.Split(b.text, "\n") {
				line, _, _ = strings.Cut(line, "#")
				if f := strings.Fields(line); len(f) > 0 {
					conf = append(conf, append([]string{"--" + f[0]}, f[1:]...)...)
				}
			}
		case b.lang == "sh":
			cmds, err := shellCommands(b)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range hooklineArgs(cmds) {
				if c.words[0] == "serve" && serve == nil {
					serve = &c
				}
			}
		}
	}
	if conf == nil || serve == nil {
		t.Fatalf("docs/DEPLOY.md has no redis.conf block (%v) or no hookline serve command (%v)", conf, serve)
	}
	rs := redistest.Start(t, conf...)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args := append([]string{}, serve.words...)
	hostRE := regexp.MustCompile(`@[^/@]+(/|$)`)
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--addr":
			args[i+1] = addr
		case "--redis-url":
			if !strings.Contains(args[i+1], ":PASSWORD@") {
				t.Fatalf("docs/DEPLOY.md:%d: the Redis URL %q does not log in as the ACL user of redis.conf", serve.line, args[i+1])
			}
			args[i+1] = hostRE.ReplaceAllString(args[i+1], "@"+rs.Addr()+"$1")
		}
	}
	var out relaytest.Buffer
	cmd := exec.Command(testenv.BuildHookline(t), args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	base := "http://" + addr
	out.WaitFor(t, "listening on")

	channel := base + "/deploy-doc-channel-0001"
	resp, err := http.Post(channel, "application/json", strings.NewReader(`{"zen":"deployed"}`))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST through the documented replica: %s %s\n%s", resp.Status, answer, out.String())
	}
	req, _ := http.NewRequest("GET", channel, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", "0")
	stream, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	lines := bufio.NewScanner(stream.Body)
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "data:") && strings.Contains(lines.Text(), "deployed") {
			return
		}
	}
	t.Fatalf("the stream ended without the delivery (%v):\n%s", lines.Err(), out.String())
}
