package agent

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// docs/AGENTS.md documents every tool: a row of its table names the tool
// and each of its input's properties, so that what the docs say is what
// tools/list gives.
func TestAgentsDocNamesEveryToolAndInput(t *testing.T) {
	doc, err := os.ReadFile("../../docs/AGENTS.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|(.*)$").FindAllStringSubmatch(string(doc), -1) {
		rows[m[1]] = m[2]
	}
	s := New(Options{Inspector: func() (Endpoint, error) { return Endpoint{}, nil }})
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := s.MCP().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "doc-test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 6 {
		t.Errorf("%d tools, want 6", len(tools.Tools))
	}
	for _, tool := range tools.Tools {
		row, ok := rows[tool.Name]
		if !ok {
			t.Errorf("docs/AGENTS.md has no row for the tool %s", tool.Name)
			continue
		}
		schema, _ := tool.InputSchema.(map[string]any)
		props, _ := schema["properties"].(map[string]any)
		if len(props) == 0 {
			t.Errorf("%s: no input properties in its schema %v", tool.Name, tool.InputSchema)
		}
		for name := range props {
			if name == "url" { // documented under Safety: refused unless one of the run's targets
				continue
			}
			if !strings.Contains(row, "`"+name+"`") {
				t.Errorf("docs/AGENTS.md's row of %s does not name its input %s", tool.Name, name)
			}
		}
	}
}
