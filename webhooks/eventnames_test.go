package webhooks_test

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hookline/hookline/webhooks"
)

func TestEmitterEventNames(t *testing.T) {
	names := webhooks.EmitterEventNames()
	// 316 names from the 74 rows of the seed's table (74 events plus 242
	// actions), plus issue_dependencies and its 4 actions,
	// secret_scanning_alert.assigned and .unassigned, and
	// repository_dispatch.sample.collected.
	const want = 324
	if len(names) != want {
		t.Errorf("len(EmitterEventNames()) = %d, want %d", len(names), want)
	}
	if !slices.IsSorted(names) {
		t.Error("EmitterEventNames() is not sorted")
	}
	if len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Error("EmitterEventNames() has duplicates")
	}
	for _, name := range []string{
		"branch_protection_configuration", "branch_protection_configuration.disabled",
		"check_run.requested_action", "code_scanning_alert.appeared_in_branch", "create", "delete",
		"custom_property.promote_to_enterprise", "dependabot_alert.auto_reopened",
		"discussion.category_changed", "github_app_authorization", "github_app_authorization.revoked",
		"installation.new_permissions_accepted", "issues", "issues.opened", "issues.typed", "issues.untyped",
		"issue_dependencies.blocked_by_added", "marketplace_purchase.pending_change_cancelled",
		"merge_group.checks_requested", "ping", "projects_v2_item.reordered", "projects_v2_status_update.created",
		"pull_request.review_request_removed", "pull_request.synchronize", "push",
		"repository_dispatch.sample", "repository_dispatch.sample.collected", "repository_vulnerability_alert.resolve",
		"secret_scanning_alert.assigned", "secret_scanning_alert.publicly_leaked", "security_and_analysis",
		"sponsorship.pending_tier_change", "sub_issues.parent_issue_added", "team_add", "watch.started",
		"workflow_dispatch", "workflow_job.waiting", "workflow_run.completed",
	} {
		if _, ok := slices.BinarySearch(names, name); !ok {
			t.Errorf("EmitterEventNames() lacks %q", name)
		}
	}
	for _, name := range []string{
		"push.opened", "forge_app_authorization", "forge_app_authorization.revoked", "*", "error", "",
		"Issues", "issues.", "issues.opened.extra", "ping.created", "create.created",
	} {
		if _, ok := slices.BinarySearch(names, name); ok {
			t.Errorf("EmitterEventNames() holds %q", name)
		}
	}
	if names[0] != "branch_protection_configuration" || names[len(names)-1] != "workflow_run.requested" {
		t.Errorf("EmitterEventNames() runs from %q to %q", names[0], names[len(names)-1])
	}
}

func TestEmitterEventNamesIsACopy(t *testing.T) {
	a := webhooks.EmitterEventNames()
	a[0] = "changed"
	if b := webhooks.EmitterEventNames(); b[0] != "branch_protection_configuration" {
		t.Errorf("EmitterEventNames()[0] = %q after a caller modified its slice", b[0])
	}
}

func TestValidateEventName(t *testing.T) {
	tests := []struct {
		name     string
		event    string
		mode     string
		want     error
		wantWarn bool
	}{
		{"known", "push", "", nil, false},
		{"known action", "issues.opened", "", nil, false},
		{"known warn mode", "issues.opened", "warn", nil, false},
		{"unknown", "push.opened", "", webhooks.ErrUnknownEventName, false},
		{"unknown case", "Push", "", webhooks.ErrUnknownEventName, false},
		{"unknown other mode", "nope", "loud", webhooks.ErrUnknownEventName, false},
		{"unknown warn", "nope", "warn", nil, true},
		{"unknown ignore", "nope", "ignore", nil, false},
		{"star", "*", "", webhooks.ErrReservedEventName, false},
		{"star warn", "*", "warn", webhooks.ErrReservedEventName, false},
		{"star ignore", "*", "ignore", webhooks.ErrReservedEventName, false},
		{"error", "error", "", webhooks.ErrReservedEventName, false},
		{"error warn", "error", "warn", webhooks.ErrReservedEventName, false},
		{"error ignore", "error", "ignore", webhooks.ErrReservedEventName, false},
		{"empty", "", "ignore", webhooks.ErrMissingName, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, logs := newLogger()
			err := webhooks.ValidateEventName(tt.event, webhooks.ValidateOptions{OnUnknownEventName: tt.mode, Logger: log})
			if !errors.Is(err, tt.want) {
				t.Errorf("ValidateEventName(%q, %q) = %v, want %v", tt.event, tt.mode, err, tt.want)
			}
			warned := strings.Contains(logs.String(), "level=WARN")
			if warned != tt.wantWarn {
				t.Errorf("ValidateEventName(%q, %q) logged %q, want warning %v", tt.event, tt.mode, logs.String(), tt.wantWarn)
			}
		})
	}
}

func TestValidateEventNameMessages(t *testing.T) {
	tests := []struct{ name, want string }{
		{"pushy", `webhooks: unknown event name "pushy" (see https://docs.github.com/en/webhooks/webhook-events-and-payloads)`},
		{"*", `webhooks: reserved event name "*": use OnAny to handle every event`},
		{"error", `webhooks: reserved event name "error": use OnError to handle errors`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := webhooks.ValidateEventName(tt.name, webhooks.ValidateOptions{})
			if err == nil || err.Error() != tt.want {
				t.Errorf("ValidateEventName(%q) = %v, want %q", tt.name, err, tt.want)
			}
		})
	}
}

// FuzzValidateEventName checks that ValidateEventName never panics, accepts
// exactly the listed names, and rejects "*" and "error" in every mode.
//
// Run: go test ./webhooks -run '^$' -fuzz '^FuzzValidateEventName$' -fuzztime 30s
func FuzzValidateEventName(f *testing.F) {
	for _, s := range []string{"push", "issues.opened", "push.opened", "*", "error", "", "github_app_authorization.revoked", "a.b.c", "\xff"} {
		f.Add(s, "")
		f.Add(s, "warn")
		f.Add(s, "ignore")
	}
	names := webhooks.EmitterEventNames()
	f.Fuzz(func(t *testing.T, name, mode string) {
		err := webhooks.ValidateEventName(name, webhooks.ValidateOptions{OnUnknownEventName: mode, Logger: discard})
		_, known := slices.BinarySearch(names, name)
		switch {
		case name == "*" || name == "error":
			if !errors.Is(err, webhooks.ErrReservedEventName) {
				t.Fatalf("ValidateEventName(%q, %q) = %v, want ErrReservedEventName", name, mode, err)
			}
		case name == "":
			if !errors.Is(err, webhooks.ErrMissingName) {
				t.Fatalf("ValidateEventName(%q, %q) = %v, want ErrMissingName", name, mode, err)
			}
		case known || mode == "warn" || mode == "ignore":
			if err != nil {
				t.Fatalf("ValidateEventName(%q, %q) = %v, want nil", name, mode, err)
			}
		default:
			if !errors.Is(err, webhooks.ErrUnknownEventName) {
				t.Fatalf("ValidateEventName(%q, %q) = %v, want ErrUnknownEventName", name, mode, err)
			}
		}
	})
}

// Every name of EmitterEventNames has its constant, and every Event
// constant is such a name (read from the package's source, since a
// misspelt constant cannot be checked by a compiling test).
func TestEventConstants(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{} // value -> constant
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "Event") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, _ := strconv.Unquote(lit.Value)
					consts[v] = name.Name
				}
			}
		}
	}
	names := webhooks.EmitterEventNames()
	for _, n := range names {
		if consts[n] == "" {
			t.Errorf("no constant for %q", n)
		}
	}
	for v, c := range consts {
		if !slices.Contains(names, v) {
			t.Errorf("constant %s = %q is not an event name", c, v)
		}
	}
	if len(consts) != len(names) {
		t.Errorf("%d constants for %d names", len(consts), len(names))
	}
}
