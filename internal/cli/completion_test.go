package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hookline/hookline/internal/testutil/testenv"
)

// completionScript runs `hookline completion shell` and returns the script.
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	code, out, errOut := run(t, "completion", shell)
	if code != ExitOK || errOut != "" {
		t.Fatalf("completion %s: exit %d, stderr %q", shell, code, errOut)
	}
	return out
}

// The fish script names every command and the flags of one; the others
// complete by asking hookline (--generate-bash-completion).
func TestCompletionScripts(t *testing.T) {
	for _, shell := range shells {
		t.Run(shell, func(t *testing.T) {
			script := completionScript(t, shell)
			want := []string{"hookline", "--generate-bash-completion"}
			if shell == "fish" {
				want = []string{
					"version", "serve", "forward", "client", "replay", "send", "sign", "verify", "events", "completion",
					"-l target", "-l secret-file", "-l no-color",
				}
			}
			for _, w := range want {
				if !strings.Contains(script, w) {
					t.Errorf("the %s script does not mention %q", shell, w)
				}
			}
		})
	}
}

// writeScript writes script to a file for a shell to read.
func writeScript(t *testing.T, script string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookline-completion")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// hooklineOnPath returns a PATH whose first directory holds "hookline":
// this test binary, which then runs as hookline (see TestMain).
func hooklineOnPath(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(self, filepath.Join(dir, "hookline")); err != nil {
		t.Fatal(err)
	}
	return dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// The bash script parses, and completes commands, flags and shells the way
// bash calls it (COMP_WORDS, COMP_CWORD), by asking the installed hookline.
func TestCompletionBash(t *testing.T) {
	testenv.Tools(t, "bash")
	path := writeScript(t, completionScript(t, "bash"))
	env := append(os.Environ(), "PATH="+hooklineOnPath(t), asHooklineEnv+"=1")
	if out, err := exec.Command("bash", "-n", path).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	tests := []struct {
		name  string
		words []string // the command line; the last word is being completed
		want  string   // COMPREPLY, space-separated
	}{
		{"commands", []string{"hookline", "s"}, "send serve sign"},
		{"alias", []string{"hookline", "cl"}, "client"},
		{"global flags", []string{"hookline", "--no"}, "--no-color"},
		{"command flags", []string{"hookline", "forward", "--ta"}, "--target --target-header --target-secret"},
		// A flag typed whole is offered too: urfave/cli's own completion
		// left it out, and bash completed --target to --target-secret.
		{"a flag typed whole", []string{"hookline", "forward", "--target"}, "--target --target-header --target-secret"},
		{"after another flag", []string{"hookline", "--no-color", "send", "--pay"}, "--payload"},
		{"shells", []string{"hookline", "completion", ""}, "bash zsh fish powershell"},
		{"a flag value falls back to files", []string{"hookline", "send", "--payload", ""}, ""},
		{"an unknown command", []string{"hookline", "nope", "--"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var quoted []string
			for _, w := range tt.words {
				quoted = append(quoted, "'"+w+"'")
			}
			script := "source " + path + "\n" +
				"COMP_WORDS=(" + strings.Join(quoted, " ") + ")\n" +
				"COMP_CWORD=" + strconv.Itoa(len(tt.words)-1) + "\n" +
				"_hookline\n" +
				`echo "${COMPREPLY[*]}"` + "\n"
			cmd := exec.Command("bash", "--norc", "--noprofile", "-c", script)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("bash: %v\n%s", err, out)
			}
			if got := strings.TrimSpace(string(out)); got != tt.want {
				t.Errorf("completing %q = %q, want %q", tt.words, got, tt.want)
			}
		})
	}
}

// The zsh and fish scripts parse, and fish completes with them, when those
// shells are installed (bash always is; CI does not install zsh or fish).
func TestCompletionZshFish(t *testing.T) {
	for _, shell := range []string{"zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			if _, err := exec.LookPath(shell); err != nil {
				t.Skipf("%s is not installed: its script is not syntax-checked", shell)
			}
			path := writeScript(t, completionScript(t, shell))
			if out, err := exec.Command(shell, "-n", path).CombinedOutput(); err != nil {
				t.Fatalf("%s -n: %v\n%s", shell, err, out)
			}
			if shell != "fish" {
				return
			}
			for line, want := range map[string]string{
				"hookline forw":         "forward",
				"hookline forward --ta": "--target\n--target-secret",
			} {
				out, err := exec.Command("fish", "--no-config", "-c", "source "+path+"; complete -C '"+line+"'").CombinedOutput()
				if err != nil {
					t.Fatalf("fish: %v\n%s", err, out)
				}
				var got []string
				for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
					word, _, _ := strings.Cut(l, "\t")
					got = append(got, word)
				}
				if strings.Join(got, "\n") != want {
					t.Errorf("fish completes %q with %q, want %q", line, got, want)
				}
			}
		})
	}
}

func TestCompletionUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"completion"}, {"completion", "tcsh"}, {"completion", "bash", "zsh"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, errOut := run(t, args...)
			if code != ExitUsage {
				t.Errorf("exit code = %d, want %d", code, ExitUsage)
			}
			if out != "" || !strings.Contains(errOut, "bash, zsh, fish, powershell") {
				t.Errorf("stdout %q, stderr %q; want nothing, and the shells named on stderr", out, errOut)
			}
		})
	}
}
