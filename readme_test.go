package main

import (
	"context"
	"fmt"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"github.com/hookline/hookline/internal/testutil/relaytest"
	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/webhooks"
)

// These tests keep README.md and docs/ true: the README's quick start runs
// as written, and in the README and every page of docs/ every command and
// flag shown exists, every command has an example, every HOOKLINE_*
// variable named is read by the code, every test cited exists, and the Go
// examples compile.

// readmeBlock is one fenced code block of a Markdown file (README.md,
// docs/DEPLOY.md).
type readmeBlock struct {
	file    string // README.md, docs/COMMANDS.md...
	lang    string // the info string: sh, go, text...
	section string // the "## " heading it is under
	line    int    // the line of its opening fence
	text    string
}

// readmeBlocks returns README.md's fenced code blocks, and its text outside
// them.
func readmeBlocks(t *testing.T) ([]readmeBlock, string) {
	t.Helper()
	return markdownBlocks(t, "README.md")
}

// docsBlocks returns the fenced code blocks of README.md and of every page
// of docs/, and their text outside them.
func docsBlocks(t *testing.T) ([]readmeBlock, string) {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []readmeBlock
	var prose strings.Builder
	for _, file := range append([]string{"README.md"}, pages...) {
		b, p := markdownBlocks(t, file)
		blocks = append(blocks, b...)
		prose.WriteString(p)
	}
	return blocks, prose.String()
}

// markdownBlocks returns the fenced code blocks of a Markdown file, and its
// text outside them.
func markdownBlocks(t *testing.T, file string) ([]readmeBlock, string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []readmeBlock
	var prose strings.Builder
	var cur *readmeBlock
	var body []string
	section := ""
	for i, line := range strings.Split(string(data), "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &readmeBlock{file: filepath.ToSlash(file), lang: strings.TrimSpace(strings.TrimPrefix(line, "```")), section: section, line: i + 1}
			body = nil
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.text = strings.Join(body, "\n")
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			body = append(body, line)
		default:
			if strings.HasPrefix(line, "## ") {
				section = strings.TrimPrefix(line, "## ")
			}
			prose.WriteString(line + "\n")
		}
	}
	if cur != nil {
		t.Fatalf("%s:%d: unterminated code block", file, cur.line)
	}
	return blocks, prose.String()
}

// readmeShell expands a README word with no variables set and nothing
// run; a word that would run something fails and is kept as written.
var readmeShell = &expand.Config{
	Env:       expand.ListEnviron(),
	ProcSubst: func(*syntax.ProcSubst) (string, error) { return "", fmt.Errorf("process substitution") },
}

// shellCommand is one simple command of a README sh block, in words.
type shellCommand struct {
	file  string
	line  int
	words []string
}

// shellCommands returns the simple commands of an sh block, those inside
// pipelines, lists and substitutions included, each word as the shell
// reads it (mvdan.cc/sh parses the block; a word that needs a command run
// to expand is kept as written).
func shellCommands(b readmeBlock) ([]shellCommand, error) {
	f, err := syntax.NewParser().Parse(strings.NewReader(b.text), "")
	if err != nil {
		return nil, fmt.Errorf("line %d of a block: %w", b.line, err)
	}
	var cmds []shellCommand
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		c := shellCommand{file: b.file, line: b.line + int(call.Pos().Line())}
		for _, w := range call.Args {
			fields, err := expand.Fields(readmeShell, w)
			if err != nil {
				var src strings.Builder
				syntax.NewPrinter().Print(&src, w)
				fields = []string{src.String()}
			}
			c.words = append(c.words, fields...)
		}
		if len(c.words) > 0 {
			cmds = append(cmds, c)
		}
		return true
	})
	return cmds, nil
}

// hooklineArgs returns the arguments of the hookline invocations in cmds
// (a command may run hookline anywhere in it: `source <(hookline ...)` is
// cut into its own command by shellCommands).
func hooklineArgs(cmds []shellCommand) []shellCommand {
	var out []shellCommand
	for _, c := range cmds {
		if c.words[0] == "hookline" {
			out = append(out, shellCommand{file: c.file, line: c.line, words: c.words[1:]})
		}
	}
	return out
}

// cliHelp is what `hookline --help` and `hookline COMMAND --help` say.
type cliHelp struct {
	commands map[string]string          // name or alias → command name
	flags    map[string]map[string]bool // command ("" for global) → flag names with dashes
	envVars  map[string]bool            // the [$VAR] of every flag
}

var optionName = regexp.MustCompile(`(?:^|, )(--?[a-zA-Z][a-zA-Z0-9-]*)`)

// readHelp runs the binary's help for every command.
func readHelp(t *testing.T, bin string) cliHelp {
	t.Helper()
	h := cliHelp{commands: map[string]string{}, flags: map[string]map[string]bool{}, envVars: map[string]bool{}}
	help := func(args ...string) (commands []string, flags map[string]bool) {
		out, err := exec.Command(bin, append(args, "--help")...).CombinedOutput()
		if err != nil {
			t.Fatalf("hookline %s --help: %v\n%s", strings.Join(args, " "), err, out)
		}
		flags = map[string]bool{}
		section := ""
		for _, line := range strings.Split(string(out), "\n") {
			if line != "" && line[0] != ' ' {
				section = line
				continue
			}
			entry := strings.TrimSpace(line)
			switch section {
			case "COMMANDS:":
				names, _, _ := strings.Cut(entry, "  ")
				if names != "" {
					commands = append(commands, names)
				}
			case "OPTIONS:", "GLOBAL OPTIONS:":
				spec, _, _ := strings.Cut(entry, "  ")
				for _, m := range optionName.FindAllStringSubmatch(spec, -1) {
					flags[m[1]] = true
				}
				for _, m := range regexp.MustCompile(`\[\$([A-Z0-9_, $]+)\]`).FindAllStringSubmatch(entry, -1) {
					for _, v := range strings.Split(m[1], ", $") {
						h.envVars[strings.TrimPrefix(v, "$")] = true
					}
				}
			}
		}
		return commands, flags
	}
	commands, global := help()
	h.flags[""] = global
	for _, entry := range commands {
		names := strings.Split(entry, ", ")
		for _, n := range names {
			h.commands[n] = names[0]
		}
		var subs []string
		subs, h.flags[names[0]] = help(names[0])
		for _, sub := range subs { // app new
			name := names[0] + " " + strings.Split(sub, ", ")[0]
			h.commands[name] = name
			_, h.flags[name] = help(strings.Fields(name)...)
		}
	}
	if len(h.commands) < 5 {
		t.Fatalf("hookline --help lists %d commands; the help format changed?", len(h.commands))
	}
	return h
}

// Every hookline command line in the sh blocks of the README and docs/
// names a real command and only its flags, every --flag in their prose is a
// flag of some command, and every command has an example.
func TestReadmeCommandsAndFlagsExist(t *testing.T) {
	help := readHelp(t, testenv.BuildHookline(t))
	blocks, prose := docsBlocks(t)
	shown := map[string]bool{}
	for _, b := range blocks {
		if b.lang != "sh" {
			continue
		}
		cmds, err := shellCommands(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range hooklineArgs(cmds) {
			command := ""
			for _, w := range c.words {
				if w == "--" {
					break
				}
				if !strings.HasPrefix(w, "-") || w == "-" {
					if sub := command + " " + w; command != "" && help.commands[sub] == sub {
						command = sub
						shown[sub] = true
						continue
					}
					if command == "" {
						name, ok := help.commands[w]
						if !ok {
							t.Errorf("%s:%d: hookline %s: no such command", c.file, c.line, w)
							break
						}
						command = name
						shown[name] = true
					}
					continue
				}
				flag, _, _ := strings.Cut(w, "=")
				if !help.flags[command][flag] {
					t.Errorf("%s:%d: hookline %s: %s is not a flag of %q (see hookline %s --help)",
						c.file, c.line, strings.Join(c.words, " "), flag, command, command)
				}
			}
		}
	}
	for name, canonical := range help.commands {
		hasSubcommands := slices.ContainsFunc(slices.Collect(maps.Keys(help.commands)), func(c string) bool { return strings.HasPrefix(c, name+" ") })
		if name == canonical && !shown[name] && !hasSubcommands {
			t.Errorf("neither README.md nor docs/ shows an example of hookline %s", name)
		}
	}
	all := map[string]bool{}
	for _, flags := range help.flags {
		for f := range flags {
			all[f] = true
		}
	}
	// docs/PERFORMANCE.md names the benchmark harness's flags too.
	bench, err := os.ReadFile("cmd/hookline-bench/options.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`fs\.[A-Za-z0-9]+\((?:&[A-Za-z.]+, )?"([a-z][a-z0-9-]*)"`).FindAllStringSubmatch(string(bench), -1) {
		all["--"+m[1]] = true
	}
	for _, m := range regexp.MustCompile(`(?:^|[\s\x60(])(--[a-z][a-z0-9-]*)`).FindAllStringSubmatch(prose, -1) {
		if !all[m[1]] {
			t.Errorf("README.md or docs/ mentions %s, which no command has", m[1])
		}
	}
}

// Every HOOKLINE_* variable the README names is read by the code: a flag's
// environment variable, or one set or read in Go source (the plugin
// environment, HOOKLINE_SECRET, and switches of documented test runs such
// as HOOKLINE_SOAK).
func TestReadmeEnvironmentVariables(t *testing.T) {
	help := readHelp(t, testenv.BuildHookline(t))
	_, prose := docsBlocks(t)
	var source strings.Builder
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || (strings.HasPrefix(d.Name(), ".") && path != ".")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && path != "readme_test.go" {
			data, err := os.ReadFile(path)
			source.Write(data)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile(`\bHOOKLINE_[A-Z0-9_]+`).FindAllString(prose, -1)
	if len(named) < 5 {
		t.Fatalf("README.md and docs/ name %d HOOKLINE_ variables; want the configuration table", len(named))
	}
	for _, v := range named {
		if !help.envVars[v] && !strings.Contains(source.String(), `"`+v) {
			t.Errorf("README.md or docs/ names %s, which no flag and no Go source reads", v)
		}
	}
	for _, v := range []string{"HOOKLINE_URL", "HOOKLINE_TARGET", "HOOKLINE_SECRET", "HOOKLINE_TARGET_SECRET", "NO_COLOR"} {
		if !strings.Contains(prose, "`"+v+"`") {
			t.Errorf("neither README.md nor docs/ documents %s", v)
		}
	}
}

// Every test the README cites as evidence exists.
func TestReadmeCitedTestsExist(t *testing.T) {
	_, prose := docsBlocks(t)
	cited := regexp.MustCompile("`(?:[a-z]+/)?(Test[A-Za-z0-9_]+)`").FindAllStringSubmatch(prose, -1)
	if len(cited) == 0 {
		t.Fatal("README.md and docs/ cite no test; the comparison table should")
	}
	var tests strings.Builder
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || (strings.HasPrefix(d.Name(), ".") && path != ".")) {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, "_test.go") {
			data, err := os.ReadFile(path)
			tests.Write(data)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range cited {
		if !strings.Contains(tests.String(), "func "+m[1]+"(t *testing.T)") {
			t.Errorf("README.md or docs/ cites %s, which is not a test in this repository", m[1])
		}
	}
}

// The Go examples of the README and docs/ compile and pass go vet: each
// ```go block is its imports and the body of a main function. An error
// of webhooks.Handle, HandleEvent or On dropped on the floor is a vet failure
// (unusedresult): copied from the README, it hid a handler that never ran.
func TestReadmeGoExamplesCompile(t *testing.T) {
	blocks, _ := docsBlocks(t)
	// The programs live in the module, under testdata (no ./... pattern
	// matches there), for as long as the test runs: go vet works on
	// directories.
	dir, err := os.MkdirTemp("testdata", "readme-examples-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var pkgs []string
	for i, b := range blocks {
		if b.lang != "go" {
			continue
		}
		src := b.text
		imports := ""
		if strings.HasPrefix(src, "import ") {
			end := strings.Index(src, "\n") // import "path"
			if strings.HasPrefix(src, "import (") {
				end = strings.Index(src, "\n)") + 2
			}
			if end < 2 {
				t.Fatalf("%s:%d: unterminated import block", b.file, b.line)
			}
			imports, src = src[:end], src[end:]
		}
		pkg := filepath.Join(dir, fmt.Sprintf("example%d", i))
		code := fmt.Sprintf("// %s:%d\n\npackage main\n\n%s\n\nfunc main() {\n%s\n}\n", b.file, b.line, imports, src)
		if err := os.Mkdir(pkg, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pkg, "main.go"), []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, "./"+filepath.ToSlash(pkg))
	}
	if len(pkgs) < 3 {
		t.Fatalf("README.md and docs/ have %d Go examples, want rest, webhooks and proxy", len(pkgs))
	}
	mustUse := "fmt.Sprintf,fmt.Errorf,errors.New,github.com/hookline/hookline/webhooks.Handle,github.com/hookline/hookline/webhooks.HandleEvent,(*github.com/hookline/hookline/webhooks.Emitter).On"
	args := append([]string{"vet", "-unusedresult.funcs=" + mustUse}, pkgs...)
	if out, err := testenv.GoCommand(args...).CombinedOutput(); err != nil {
		t.Errorf("the Go examples of README.md and docs/ do not compile or do not pass go vet: %v\n%s", err, out)
	}
}

// The README's go.mod lines let a program outside this repository import
// proxy and webhooks/payload from a clone: a module in a temporary
// directory, with the README's gomod block (../hookline standing for this
// checkout), builds after go mod tidy.
func TestReadmeLibrarySetup(t *testing.T) {
	if testing.Short() {
		t.Skip("go mod tidy and a build of an outside module")
	}
	blocks, _ := docsBlocks(t)
	var lines string
	for _, b := range blocks {
		if b.lang == "gomod" {
			lines = b.text
		}
	}
	if !strings.Contains(lines, "../hookline") {
		t.Fatal("docs/LIBRARIES.md has no gomod block pointing at ../hookline")
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/consumer\n\ngo 1.26\n\n" + strings.ReplaceAll(lines, "../hookline", root) + "\n"
	main := `package main

import (
	"fmt"

	"github.com/hookline/hookline/proxy"
	"github.com/hookline/hookline/webhooks/payload"
)

func main() {
	_, err := proxy.New(proxy.Options{URL: "http://127.0.0.1:3333/abc"})
	fmt.Println(err, payload.PushEvent{})
}
`
	for name, text := range map[string]string{"go.mod": gomod, "main.go": main} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", os.DevNull, "."}} {
		cmd := testenv.GoCommand(args...)
		cmd.Dir = dir
		cmd.Env = append(cmd.Env, "GOWORK=off", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s in a module using the README's lines: %v\n%s\ngo.mod:\n%s", strings.Join(args, " "), err, out, gomod)
		}
	}
}

// cleanEnv is the environment without HOOKLINE_* variables and with no
// config directory, so a developer's settings (and config file) cannot
// change what the README's commands do.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOOKLINE_") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			env = append(env, kv)
		}
	}
	return append(env, "XDG_CONFIG_HOME="+os.DevNull)
}

// The quick start runs as written: `hookline forward` in the background,
// then every other command, and the delivery reaches a local server that
// verifies its signature with the README's secret. On loopback, with three
// substitutions:
//   - forward gets --listen 127.0.0.1:0 (the README's port 3333 may be busy);
//   - http://127.0.0.1:3000 (the reader's server) becomes a test server
//     running the webhooks middleware;
//   - http://127.0.0.1:3333/<channel> becomes the channel forward printed.
func TestReadmeQuickStart(t *testing.T) {
	blocks, _ := readmeBlocks(t)
	var cmds []shellCommand
	for _, b := range blocks {
		if b.lang == "sh" && strings.HasPrefix(b.section, "Quick start") {
			c, err := shellCommands(b)
			if err != nil {
				t.Fatal(err)
			}
			cmds = append(cmds, c...)
		}
	}
	if len(cmds) < 2 {
		t.Fatalf("the README's Quick start has %d commands, want forward and send", len(cmds))
	}
	for _, c := range cmds {
		if c.words[0] != "hookline" {
			t.Fatalf("README.md:%d: %q: the quick start test runs only hookline commands", c.line, strings.Join(c.words, " "))
		}
	}
	forward := cmds[0]
	if forward.words[1] != "forward" && forward.words[1] != "client" {
		t.Fatalf("README.md:%d: the quick start must start with hookline forward", forward.line)
	}
	secret := ""
	for i, w := range forward.words {
		if w == "--secret" && i+1 < len(forward.words) {
			secret = forward.words[i+1]
		}
	}
	if secret == "" {
		t.Fatalf("README.md:%d: the quick start's forward has no --secret: it must show verification", forward.line)
	}

	// The reader's webhook server.
	wh, err := webhooks.New(webhooks.Options{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	received := make(chan webhooks.Event, 10)
	wh.OnAny(func(_ context.Context, e webhooks.Event) error {
		received <- e
		return nil
	})
	target := httptest.NewServer(webhooks.NewMiddleware(wh, webhooks.MiddlewareOptions{}))
	t.Cleanup(target.Close)
	substitute := func(words []string, channel string) []string {
		out := slices.Clone(words[1:])
		for i, w := range out {
			switch {
			case strings.HasPrefix(w, "http://127.0.0.1:3000"):
				out[i] = target.URL + strings.TrimPrefix(w, "http://127.0.0.1:3000")
			case strings.HasPrefix(w, "http://127.0.0.1:3333/"):
				out[i] = channel
			}
		}
		return out
	}

	bin := testenv.BuildHookline(t)
	args := append(substitute(forward.words, ""), "--listen", "127.0.0.1:0")
	cmd := exec.Command(bin, args...)
	cmd.Env = cleanEnv()
	var stdout relaytest.Buffer
	cmd.Stdout = &stdout
	fw := startForward(t, cmd, 60*time.Second)
	channel := fw.channel
	deadline := time.After(60 * time.Second)

	var sent []string
	for _, c := range cmds[1:] {
		args := substitute(c.words, channel)
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("README.md:%d: hookline %s: %v\n%s", c.line, strings.Join(args, " "), err, out)
		}
		if c.words[1] == "send" {
			for i, w := range c.words {
				if (w == "--event" || w == "-e") && i+1 < len(c.words) {
					sent = append(sent, c.words[i+1])
				}
			}
		}
	}
	if len(sent) == 0 {
		t.Fatal("the README's quick start sends nothing (hookline send --event ...)")
	}
	for _, name := range sent {
		select {
		case e := <-received:
			if got := e.Name + "." + e.Action(); got != name && e.Name != name {
				t.Errorf("the server received %s, want %s", got, name)
			}
		case <-deadline:
			t.Fatalf("%s never reached the server; forward's stderr:\n%s\nstdout:\n%s", name, fw.stderr(), stdout.String())
		}
	}

	if err := fw.interrupt(t); err != nil && runtime.GOOS != "windows" {
		t.Errorf("forward exited with %v after Ctrl-C, want 0; stderr:\n%s", err, fw.stderr())
	}
	trace := stdout.String()
	if strings.Count(trace, "✓ verified") != len(sent) || strings.Count(trace, "→ 200") != len(sent) {
		t.Errorf("forward's trace = %q, want %d lines verified and forwarded with 200", trace, len(sent))
	}
}
