package interop

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/relay"
	"github.com/hookline/hookline/webhooks"
)

// mcpTimeout bounds the whole session of mcp_client.mjs.
const mcpTimeout = 2 * time.Minute

// TestMCPWithTheTypeScriptSDK: the official MCP TypeScript SDK's client
// (mcp_client.mjs) launches `hookline mcp` as an agent does and runs the
// fix loop against a real `hookline forward` (the binary, its inspector
// found through the state directory): the delivery the server answered
// 500 is found and read, replayed edited (a header and a member of the
// body) and the server, checking the new signature with
// @octokit/webhooks-methods, answers 200; the delivery's resource is
// updated; a test event is sent; the wait returns the next delivery.
func TestMCPWithTheTypeScriptSDK(t *testing.T) {
	node := requireNode(t)
	bin := testenv.BuildHookline(t)
	state := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), mcpTimeout)
	defer cancel()

	script := exec.CommandContext(ctx, node, "mcp_client.mjs", "--hookline", bin, "--state-home", state, "--secret", secret)
	toScript, err := script.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	fromScript, err := script.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var scriptErr relaytest.Buffer
	script.Stderr = &scriptErr
	script.WaitDelay = 5 * time.Second
	if err := script.Start(); err != nil {
		t.Fatal(err)
	}
	defer script.Wait()
	defer toScript.Close()
	said := make(chan map[string]json.RawMessage)
	go func() {
		defer close(said)
		sc := bufio.NewScanner(fromScript)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]json.RawMessage
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				m = map[string]json.RawMessage{"error": json.RawMessage(`"not JSON: ` + strings.ReplaceAll(sc.Text(), `"`, `'`) + `"`)}
			}
			said <- m
		}
	}()
	next := func(want string) json.RawMessage {
		t.Helper()
		select {
		case m, ok := <-said:
			if !ok {
				t.Fatalf("mcp_client.mjs ended before saying %q; stderr:\n%s", want, scriptErr.String())
			}
			if e, ok := m["error"]; ok {
				t.Fatalf("mcp_client.mjs: %s\nstderr:\n%s", e, scriptErr.String())
			}
			if v, ok := m[want]; ok {
				return v
			}
			t.Fatalf("mcp_client.mjs said %v, want %q", m, want)
		case <-ctx.Done():
			t.Fatalf("mcp_client.mjs did not say %q within %s; stderr:\n%s", want, mcpTimeout, scriptErr.String())
		}
		return nil
	}
	var target string
	json.Unmarshal(next("target"), &target)

	rl := relaytest.Start(t, relay.Options{})
	fwd := exec.CommandContext(ctx, bin, "forward", "--url", rl.Channel, "--no-state", "--no-color", "--secret", secret, "--target", target, "--inspect", "127.0.0.1:0")
	fwd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
	var trace, info relaytest.Buffer
	fwd.Stdout, fwd.Stderr = &trace, &info
	fwd.WaitDelay = 5 * time.Second
	if err := fwd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		fwd.Process.Signal(os.Interrupt)
		fwd.Wait()
		if t.Failed() {
			t.Logf("forward's trace:\n%s\nforward's stderr:\n%s", trace.String(), info.String())
		}
	}()
	info.Wait(t, "forward to connect", func(s string) bool { return strings.Contains(s, "connected to") })
	publish := func(n int, title string) {
		body := []byte(`{"action":"opened","issue":{"number":1,"title":"` + title + `"},"repository":{"full_name":"octo/hello"},"sender":{"login":"octocat"}}`)
		sig, _ := webhooks.Sign(secret, body)
		rl.Publish(t, nil, n, body, webhooks.HeaderSignature256, sig)
	}
	publish(1, "crash")
	trace.Wait(t, "the first delivery's line", func(s string) bool { return strings.Count(s, "\n") >= 1 })
	io.WriteString(toScript, "go\n")

	next("publish")
	trace.Wait(t, "the wait to begin", func(s string) bool { return strings.Contains(s, "agent ts-sdk-test: wait_for_delivery") })
	publish(2, "after the wait began")

	var done struct {
		Server struct {
			Name string `json:"name"`
		} `json:"server"`
		Tools        []string `json:"tools"`
		FailedStatus int      `json:"failedStatus"`
		Answer       string   `json:"answer"`
		RequestTitle string   `json:"requestTitle"`
		Replay       struct {
			Outcome  string `json:"outcome"`
			Status   int    `json:"status"`
			ReplayOf int64  `json:"replayOf"`
		} `json:"replay"`
		ServerSawReplay struct {
			Verified bool   `json:"verified"`
			Debug    string `json:"debug"`
			Title    string `json:"title"`
		} `json:"serverSawReplay"`
		Updated            string  `json:"updated"`
		ReplaysAfterUpdate []int64 `json:"replaysAfterUpdate"`
		Sent               struct {
			Sent   bool `json:"sent"`
			Status int  `json:"status"`
		} `json:"sent"`
		ServerSawSent struct {
			Verified bool   `json:"verified"`
			Title    string `json:"title"`
		} `json:"serverSawSent"`
		Waited  []string `json:"waited"`
		Refused struct {
			IsError bool   `json:"isError"`
			Text    string `json:"text"`
		} `json:"refused"`
		SecretInOutput bool `json:"secretInOutput"`
	}
	raw := next("done")
	if err := json.Unmarshal(raw, &done); err != nil {
		t.Fatalf("mcp_client.mjs's findings: %v\n%s", err, raw)
	}
	check := func(ok bool, what string) {
		t.Helper()
		if !ok {
			t.Errorf("%s; the session found:\n%s", what, raw)
		}
	}
	check(done.Server.Name == "hookline", "the server is not hookline")
	check(slices.Equal(done.Tools, []string{"get_delivery", "list_deliveries", "replay_delivery", "replay_edited", "send_test_event", "wait_for_delivery"}), "the tools listed")
	check(done.FailedStatus == 500 && strings.Contains(done.Answer, "TypeError: cannot read the crash") && done.RequestTitle == "crash", "the failed delivery and its answer")
	check(done.Replay.Outcome == "verified" && done.Replay.Status == 200 && done.Replay.ReplayOf == 1, "the edited replay's outcome")
	check(done.ServerSawReplay.Verified && done.ServerSawReplay.Debug == "1" && done.ServerSawReplay.Title == "fixed", "what the server got of the edited replay (verified by @octokit/webhooks-methods)")
	check(done.Updated == "hookline://deliveries/1" && len(done.ReplaysAfterUpdate) == 1, "the resource's update after the replay")
	check(done.Sent.Sent && done.Sent.Status == 200 && done.ServerSawSent.Verified && done.ServerSawSent.Title == "from the agent", "the test event")
	check(slices.Equal(done.Waited, []string{relaytest.ID(2)}), "the delivery the wait returned")
	check(done.Refused.IsError && strings.Contains(done.Refused.Text, "did you mean issues.opened"), "a typo'd event refused with the nearest name")
	check(!done.SecretInOutput, "a tool's output holds the secret")
}
