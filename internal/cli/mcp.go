package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	ucli "github.com/urfave/cli/v2"

	"github.com/hookline/hookline/internal/agent"
	"github.com/hookline/hookline/internal/atomicfile"
)

// inspectorRecord is what forward writes in the state directory
// (inspectors/PID-PORT.json, owner-only) while its inspector runs, for hookline
// mcp to find it: the URL and the token every API request needs.
type inspectorRecord struct {
	URL     string    `json:"url"`
	Token   string    `json:"token"`
	Started time.Time `json:"started"` // the newest wins
}

// inspectorsDir is where the records are.
func inspectorsDir() (string, error) {
	dir, err := stateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "inspectors"), nil
}

// recordInspector writes the running inspector's record and returns the
// function that removes it. A state directory that cannot be written is
// said once: hookline mcp then needs --inspect-url.
func recordInspector(ep agent.Endpoint, s *streams) func() {
	dir, err := inspectorsDir()
	if err == nil {
		err = os.MkdirAll(dir, 0o700)
	}
	_, port, _ := strings.Cut(strings.TrimPrefix(ep.URL, "http://"), ":")
	file := filepath.Join(dir, strconv.Itoa(os.Getpid())+"-"+port+".json") // one process may run several
	if err == nil {
		b, _ := json.Marshal(inspectorRecord{URL: ep.URL, Token: ep.Token, Started: time.Now()})
		err = atomicfile.Write(file, b, 0o600)
	}
	if err != nil {
		fmt.Fprintf(s.err, "note: the inspector's address could not be kept for hookline mcp (%v); give it --inspect-url\n", err)
		return func() {}
	}
	return func() { os.Remove(file) }
}

// findInspector returns the inspector of the newest forward whose
// inspector answers, from the records in the state directory (a record a
// killed forward left is passed over).
func findInspector() (agent.Endpoint, error) {
	dir, err := inspectorsDir()
	if err != nil {
		return agent.Endpoint{}, fmt.Errorf("no state directory (%v): give hookline mcp --inspect-url (the inspector URL forward printed)", err)
	}
	entries, _ := os.ReadDir(dir)
	var found []inspectorRecord
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		var r inspectorRecord
		if err != nil || json.Unmarshal(b, &r) != nil || r.URL == "" {
			continue
		}
		found = append(found, r)
	}
	slices.SortFunc(found, func(a, b inspectorRecord) int { return b.Started.Compare(a.Started) }) // newest first
	for _, r := range found {
		if answers(r.URL) {
			return agent.Endpoint{URL: r.URL, Token: r.Token}, nil
		}
	}
	return agent.Endpoint{}, fmt.Errorf("no hookline forward with an inspector is running for this user (none answers of those recorded in %s): start one, such as `hookline forward --target http://127.0.0.1:3000/hook`, then call again", dir)
}

// answers reports whether an inspector answers at base.
func answers(base string) bool {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(base + "/app.css")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// parseInspectURL reads --inspect-url: the inspector URL forward printed,
// http://127.0.0.1:4040/?token=...
func parseInspectURL(raw string) (agent.Endpoint, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return agent.Endpoint{}, usageErrorf("--inspect-url %q: give the inspector URL forward printed, such as http://127.0.0.1:4040/?token=...", raw)
	}
	token := u.Query().Get("token")
	if token == "" {
		return agent.Endpoint{}, usageErrorf("--inspect-url: the URL has no ?token= (the inspector URL forward printed carries it)")
	}
	return agent.Endpoint{URL: u.Scheme + "://" + u.Host, Token: token}, nil
}

func mcpCommand(s *streams) *ucli.Command {
	var inspectURL string
	var readOnly bool
	return &ucli.Command{
		Name:  "mcp",
		Usage: "serve a running forward's inspector to a coding agent over MCP (standard input and output)",
		Description: `The Model Context Protocol server a coding agent (Claude Code, Cursor, VS Code)
launches: tools to list, read, replay (edited, signed again by the run) and
send deliveries, and wait for the next one, through the inspector of the
hookline forward running for this user (found in the state directory) or
--inspect-url. docs/AGENTS.md has the set-up of each agent.

   claude mcp add hookline -- hookline mcp
   hookline forward --target http://127.0.0.1:3000/hook --mcp   # one process: forward and the MCP server`,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "inspect-url", Usage: "the inspector `URL` forward printed, with its ?token= (default: the newest forward running for this user)", EnvVars: []string{"HOOKLINE_INSPECT_URL"}, Destination: &inspectURL},
			&ucli.BoolFlag{Name: "read-only", Aliases: []string{"mcp-read-only"}, Usage: "leave out the tools that send (replays, test events)", Destination: &readOnly},
		},
		Action: func(c *ucli.Context) error {
			if c.NArg() > 0 {
				return usageErrorf("mcp takes no arguments (got %q)", c.Args().First())
			}
			find := findInspector
			if inspectURL != "" {
				ep, err := parseInspectURL(inspectURL)
				if err != nil {
					return err
				}
				find = func() (agent.Endpoint, error) { return ep, nil }
			}
			srv := agent.New(agent.Options{Inspector: find, ReadOnly: readOnly, Version: version})
			return serveMCP(c.Context, srv, s.in, s.out)
		},
	}
}

// serveMCP runs srv on in and out (newline-delimited JSON-RPC, MCP's stdio
// transport) until the client closes in or ctx ends.
func serveMCP(ctx context.Context, srv *agent.Server, in io.Reader, out io.Writer) error {
	rc, ok := in.(io.ReadCloser)
	if !ok {
		rc = io.NopCloser(in)
	}
	wc, ok := out.(io.WriteCloser)
	if !ok {
		wc = nopWriteCloser{out}
	}
	err := srv.Run(ctx, &mcp.IOTransport{Reader: rc, Writer: wc})
	switch {
	case err == nil, ctx.Err() != nil: // the client left (the SDK's nil), or Ctrl-C
		return nil
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrClosedPipe), errors.Is(err, os.ErrClosed), errors.Is(err, syscall.EPIPE):
		return nil // the client left while a message was on its way
	}
	return err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
