package cli

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
)

// run runs the CLI with args and returns its exit code, stdout and stderr.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(t.Context(), append([]string{"hookline"}, args...), strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// setVersion sets the ldflags variables for one test.
func setVersion(t *testing.T, v, c, d string) {
	t.Helper()
	oldV, oldC, oldD := version, commit, date
	version, commit, date = v, c, d
	t.Cleanup(func() { version, commit, date = oldV, oldC, oldD })
}

func TestVersion(t *testing.T) {
	setVersion(t, "v1.2.3", "abc1234", "2026-11-22T10:00:00Z")
	for _, args := range [][]string{{"version"}, {"--version"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, errOut := run(t, args...)
			if code != ExitOK {
				t.Fatalf("exit code = %d, want 0 (stderr %q)", code, errOut)
			}
			for _, want := range []string{"hookline v1.2.3\n", "commit: abc1234\n", "built:  2026-11-22T10:00:00Z\n"} {
				if !strings.Contains(out, want) {
					t.Errorf("output %q does not contain %q", out, want)
				}
			}
			if errOut != "" {
				t.Errorf("stderr = %q, want empty", errOut)
			}
		})
	}
}

// A letter means one thing everywhere: -v is --verbose in the commands, so
// it is not also the version before them; -p is forward's --port, not also
// send's --payload.
func TestOneMeaningPerLetter(t *testing.T) {
	meaning := map[string]string{} // letter -> flag name
	app := newApp(&streams{})
	for _, cmd := range app.Commands {
		for _, f := range cmd.Flags {
			names := f.Names()
			for _, alias := range names[1:] {
				if len(alias) != 1 {
					continue
				}
				if prev, ok := meaning[alias]; ok && prev != names[0] {
					t.Errorf("-%s is --%s in one command and --%s in %s", alias, prev, names[0], cmd.Name)
				}
				meaning[alias] = names[0]
			}
		}
	}
	for _, f := range app.Flags {
		for _, alias := range f.Names()[1:] {
			if prev, ok := meaning[alias]; ok && prev != f.Names()[0] {
				t.Errorf("hookline -%s is --%s, but -%s is --%s in a command", alias, f.Names()[0], alias, prev)
			}
		}
	}
	if code, _, _ := run(t, "-v"); code != ExitUsage {
		t.Errorf("hookline -v: exit %d, want a usage error (the version is --version)", code)
	}
}

func TestFillFromBuildInfo(t *testing.T) {
	tests := []struct {
		name string
		in   versionInfo
		info debug.BuildInfo
		want versionInfo
	}{
		{
			name: "go install records the module version",
			info: debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}},
			want: versionInfo{Version: "v0.3.0"},
		},
		{
			name: "devel build in a checkout records the revision",
			info: debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "0123abcd"},
				{Key: "vcs.time", Value: "2026-11-20T08:00:00Z"},
				{Key: "vcs.modified", Value: "true"},
			}},
			want: versionInfo{Commit: "0123abcd-dirty", Date: "2026-11-20T08:00:00Z"},
		},
		{
			name: "ldflags win over build info",
			in:   versionInfo{Version: "v9.9.9", Commit: "feed", Date: "yesterday"},
			info: debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}, Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "0123abcd"},
				{Key: "vcs.time", Value: "2026-11-20T08:00:00Z"},
			}},
			want: versionInfo{Version: "v9.9.9", Commit: "feed", Date: "yesterday"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in
			fillFromBuildInfo(&got, &tt.info)
			if got != tt.want {
				t.Errorf("fillFromBuildInfo = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"unknown command", []string{"frobnicate"}, `hookline: unknown command "frobnicate"; run 'hookline --help' for the list of commands` + "\n"},
		{"unknown flag", []string{"--frobnicate"}, "hookline: flag provided but not defined: -frobnicate; run 'hookline --help' for usage\n"},
		// Every command: one line on stderr, nothing on stdout, exit 2.
		{"command typo", []string{"forwrd"}, `hookline: unknown command "forwrd" (did you mean forward?); run 'hookline --help' for the list of commands` + "\n"},
		{"forward flag typo", []string{"forward", "--taget", "x"}, "hookline: forward: unknown flag --taget (did you mean --target?)\n"},
		{"verify flag typo", []string{"verify", "--signture", "x"}, "hookline: verify: unknown flag --signture (did you mean --signature?)\n"},
		{"gosmee's flag", []string{"forward", "--saveDir", "x"}, "hookline: forward: unknown flag --saveDir (gosmee's flag; hookline's is --save)\n"},
		{"gosmee's flag with a difference", []string{"forward", "--exec-on-events", "push"}, "hookline: forward: unknown flag --exec-on-events (gosmee's flag; hookline's is --events, which filters deliveries, plugins included)\n"},
		{"send short flag", []string{"send", "-v"}, "hookline: send: unknown flag -v\n"},
		{"duration without unit", []string{"forward", "--timeout", "5"}, `hookline: forward: --timeout "5": want a duration such as 5s, 30s or 2m` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, tt.args...)
			if code != ExitUsage || out != "" {
				t.Errorf("exit code = %d, stdout %q; want %d and nothing (no help)", code, out, ExitUsage)
			}
			if errOut != tt.wantErr {
				t.Errorf("stderr = %q, want %q", errOut, tt.wantErr)
			}
		})
	}
}

func TestHelpListsCommands(t *testing.T) {
	code, out, _ := run(t)
	if code != ExitOK {
		t.Fatalf("exit code = %d, want 0", code)
	}
	if !strings.Contains(out, "version") || !strings.Contains(out, "--no-color") {
		t.Errorf("help output lacks the version command or --no-color:\n%s", out)
	}
}

func TestUseColor(t *testing.T) {
	tests := []struct {
		flag, env, tty bool
		want           bool
	}{
		{flag: false, env: false, tty: true, want: true},
		{flag: true, env: false, tty: true, want: false},
		{flag: false, env: true, tty: true, want: false},
		{flag: false, env: false, tty: false, want: false},
		{flag: true, env: true, tty: false, want: false},
	}
	for _, tt := range tests {
		if got := useColor(tt.flag, tt.env, tt.tty); got != tt.want {
			t.Errorf("useColor(flag=%v, NO_COLOR=%v, tty=%v) = %v, want %v", tt.flag, tt.env, tt.tty, got, tt.want)
		}
	}
}

func TestStreamsAreNeverColouredWhenNotATerminal(t *testing.T) {
	s := &streams{out: &bytes.Buffer{}, err: &bytes.Buffer{}}
	s.decideColor(false)
	if s.outColor || s.errColor {
		t.Errorf("buffers coloured: out=%v err=%v, want false, false", s.outColor, s.errColor)
	}
}

func TestPaint(t *testing.T) {
	if got, want := paint(true, 31).Sprint("x"), "\x1b[31mx\x1b[0m"; got != want {
		t.Errorf("paint(true) = %q, want %q", got, want)
	}
	if got, want := paint(false, 31).Sprint("x"), "x"; got != want {
		t.Errorf("paint(false) = %q, want %q", got, want)
	}
}

func TestNoColorFlagBeforeOrAfterTheCommand(t *testing.T) {
	for _, args := range [][]string{{"--no-color", "version"}, {"version", "--no-color"}} {
		s := &streams{in: strings.NewReader(""), out: &bytes.Buffer{}, err: &bytes.Buffer{}}
		if err := newApp(s).Run(append([]string{"hookline"}, args...)); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if !s.noColor {
			t.Errorf("%v: --no-color was not seen", args)
		}
	}
	s := &streams{in: strings.NewReader(""), out: &bytes.Buffer{}, err: &bytes.Buffer{}}
	if err := newApp(s).Run([]string{"hookline", "version"}); err != nil || s.noColor {
		t.Errorf("without the flag: noColor = %v, err = %v; want false, nil", s.noColor, err)
	}
}

// The help a user reads first: commands in the order they need them, with
// examples; forward's flags grouped by concern, with placeholders.
func TestHelpGolden(t *testing.T) {
	for _, tt := range []struct {
		file string
		args []string
	}{
		{"help.txt", []string{"--help"}},
		{"help-forward.txt", []string{"forward", "--help"}},
	} {
		t.Run(tt.file, func(t *testing.T) {
			code, out, errOut := run(t, tt.args...)
			if code != ExitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			golden(t, tt.file, []byte(out))
		})
	}
}
