package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	ucli "github.com/urfave/cli/v2"
)

// Set by the release build with
//
//	-ldflags "-X github.com/hookline/hookline/internal/cli.version=v1.2.3
//	          -X github.com/hookline/hookline/internal/cli.commit=abc1234
//	          -X github.com/hookline/hookline/internal/cli.date=2026-11-22T10:00:00Z"
//
// When empty, buildVersion falls back to the module build info.
var (
	version string
	commit  string
	date    string
)

// versionInfo is what `hookline version` prints.
type versionInfo struct {
	Version, Commit, Date, Go string
}

// buildVersion returns the version from the ldflags when set, else from the
// module build info (`go install ...@v1.2.3` records the module version, a
// build in a git checkout records the VCS revision and time).
func buildVersion() versionInfo {
	v := versionInfo{Version: version, Commit: commit, Date: date, Go: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		fillFromBuildInfo(&v, info)
	}
	if v.Version == "" {
		v.Version = "devel"
	}
	if v.Commit == "" {
		v.Commit = "unknown"
	}
	if v.Date == "" {
		v.Date = "unknown"
	}
	return v
}

// fillFromBuildInfo fills the fields of v that the ldflags left empty.
func fillFromBuildInfo(v *versionInfo, info *debug.BuildInfo) {
	if v.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		v.Version = info.Main.Version
	}
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			if v.Commit == "" {
				v.Commit = s.Value
			}
		case "vcs.time":
			if v.Date == "" {
				v.Date = s.Value
			}
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && commit == "" && v.Commit != "" {
		v.Commit += "-dirty"
	}
}

func (v versionInfo) write(w io.Writer) {
	fmt.Fprintf(w, "hookline %s\ncommit: %s\nbuilt:  %s\ngo:     %s\n", v.Version, v.Commit, v.Date, v.Go)
}

func versionCommand(s *streams) *ucli.Command {
	return &ucli.Command{
		Name:  "version",
		Usage: "print the version, commit and build date",
		Action: func(*ucli.Context) error {
			buildVersion().write(s.out)
			return nil
		},
	}
}

func init() {
	// `hookline --version` prints the same as `hookline version`, to the
	// app's injected writer.
	ucli.VersionPrinter = func(c *ucli.Context) {
		buildVersion().write(c.App.Writer)
	}
}
