package cli

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"
	"gopkg.in/yaml.v3"
)

// configEnv names a config file to use instead of the default one.
const configEnv = "HOOKLINE_CONFIG"

// The config file gives defaults for any command's flags, one section per
// command, read by urfave/cli's altsrc: a flag on the command line wins,
// then its environment variable, then the file.
//
//	# ~/.config/hookline/config.yaml
//	forward:
//	  target: http://127.0.0.1:3000/api/github/webhooks
//	  secret-file: ~/.config/hookline/secret
//	  events: [push, pull_request]
//	  routes:                     # --route, as a map: EVENTS: URL
//	    push,create: http://127.0.0.1:4000/ci
//	serve:
//	  history: 500
//
// It is $HOOKLINE_CONFIG, else config.yaml or config.yml in
// hookline's folder of the user's config directory ($XDG_CONFIG_HOME/hookline
// or ~/.config/hookline on Linux). A key that is not one of the command's
// flags is an error, as are "secret" (a secret belongs in a file:
// secret-file) and "target-secret" (in HOOKLINE_TARGET_SECRET).

// configPath returns the config file to read, or "" for none.
func configPath() (string, error) {
	if p := os.Getenv(configEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", configEnv, p, err)
		}
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", nil // no home, no config
	}
	// One format, YAML: a config.toml (read before) is named, not ignored.
	if _, err := os.Stat(filepath.Join(dir, "hookline", "config.toml")); err == nil {
		return "", fmt.Errorf("%s is not read: hookline's config file is YAML, config.yaml (the same sections and keys: 'forward:' then '  target: URL')", filepath.Join(dir, "hookline", "config.toml"))
	}
	var found []string
	for _, name := range []string{"config.yaml", "config.yml"} {
		p := filepath.Join(dir, "hookline", name)
		if _, err := os.Stat(p); err == nil {
			found = append(found, p)
		}
	}
	if len(found) > 1 {
		return "", fmt.Errorf("two config files, %s: keep one", strings.Join(found, " and "))
	}
	if len(found) == 0 {
		return "", nil
	}
	return found[0], nil
}

// readConfig reads the sections of the config file at path.
func readConfig(path string) (map[string]map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sections := map[string]map[string]any{}
	for name, v := range doc {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: %q is not a section of options (want a command name, such as forward:, with its flags below)", path, name)
		}
		sections[name] = m
	}
	return sections, nil
}

// applyConfig sets c's flags that the command line and the environment
// left unset from the command's section of the config file.
//
// A section that names no command is an error for the command it is a typo
// of ("forwrd:" stops forward), and a one-line warning for the others
// (version and sign still run). A command whose section is used says so in
// a start line, "config: PATH".
func applyConfig(c *ucli.Context, s *streams) error {
	path, err := configPath()
	if err != nil {
		return usageErrorf("config: %v", err)
	}
	if path == "" {
		return nil
	}
	sections, err := readConfig(path)
	if err != nil {
		return usageErrorf("config: %v", err)
	}
	var commands []string
	for _, cmd := range c.App.Commands {
		commands = append(commands, cmd.Name)
	}
	for _, name := range slices.Sorted(maps.Keys(sections)) {
		if c.App.Command(name) != nil {
			continue
		}
		if closest(name, commands) == c.Command.Name {
			return usageErrorf("config %s: no command %q (did you mean %s?); sections are commands: forward, replay, deliveries, send, serve...", path, name, c.Command.Name)
		}
		fmt.Fprintf(s.err, "warning: config %s: no command %q; its section is ignored\n", path, name)
	}
	section, ok := sections[c.Command.Name]
	if !ok {
		return nil
	}
	var names []string
	for _, f := range c.Command.Flags {
		names = append(names, f.Names()...)
	}
	values := map[any]any{}
	for key, v := range section {
		if key == "routes" && slices.Contains(names, "route") {
			// stripe-cli#1133's "map in the config file": EVENTS: URL.
			m, ok := v.(map[string]any)
			if !ok {
				return usageErrorf("config %s: %s: routes: want a section of EVENTS: URL lines, such as '  push,pull_request.*: http://127.0.0.1:4000/ci'", path, c.Command.Name)
			}
			var list []any
			for _, events := range slices.Sorted(maps.Keys(m)) {
				list = append(list, events+"="+fmt.Sprint(m[events]))
			}
			values["route"] = list
			continue
		}
		switch {
		case key == "secret":
			return usageErrorf("config %s: %s: keep the secret out of the config file; put it in a file and give secret-file: PATH", path, c.Command.Name)
		case key == "target-secret":
			return usageErrorf("config %s: %s: keep the target's secret out of the config file; set HOOKLINE_TARGET_SECRET", path, c.Command.Name)
		case !slices.Contains(names, key):
			hint := ""
			if best := closest(key, names); best != "" {
				hint = " (did you mean " + best + "?)"
			}
			return usageErrorf("config %s: %s has no option %q%s; run 'hookline %s --help'", path, c.Command.Name, key, hint, c.Command.Name)
		case key == "secret-file" && os.Getenv(secretEnv) != "":
			continue // the environment's secret wins over the file's
		}
		values[key] = configValue(v)
		if str, ok := values[key].(string); ok && isListFlag(c.Command.Flags, key) {
			values[key] = []any{str} // one value for a list: events: push
		}
	}
	if err := altsrc.ApplyInputSourceValues(c, altsrc.NewMapInputSource(path, values), c.Command.Flags); err != nil {
		if m := mismatchedType.FindStringSubmatch(err.Error()); m != nil {
			return usageErrorf("config %s: %s: %s: want %s, not %s", path, c.Command.Name, m[1], typeWords(m[2]), typeWords(m[3]))
		}
		return usageErrorf("config %s: %s: %v", path, c.Command.Name, err)
	}
	fmt.Fprintf(s.err, "config: %s\n", path)
	return nil
}

// mismatchedType matches altsrc's error for a value of the wrong type.
var mismatchedType = regexp.MustCompile(`^Mismatched type for flag '([^']+)'\. Expected '([^']+)' but actual is '([^']+)'`)

// typeWords says a Go type of a config value in a user's words.
func typeWords(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case goType == "string":
		return "text"
	case strings.HasPrefix(goType, "int") || strings.HasPrefix(goType, "uint") || strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "bool":
		return "true or false"
	case goType == "time.Duration":
		return "a duration such as 30s"
	case strings.HasPrefix(goType, "map"):
		return "a section"
	}
	return "a value of another kind"
}

// isListFlag reports whether the flag named name takes a list.
func isListFlag(flags []ucli.Flag, name string) bool {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			switch f.(type) {
			case *ucli.StringSliceFlag, *altsrc.StringSliceFlag:
				return true
			}
		}
	}
	return false
}

// configValue converts a YAML value to the types altsrc reads (int for
// every integer; lists are []any), with "~/" expanded in strings.
func configValue(v any) any {
	switch v := v.(type) {
	case int64:
		return int(v)
	case uint64:
		return int(v)
	case string:
		if rest, ok := strings.CutPrefix(v, "~/"); ok {
			if home, err := os.UserHomeDir(); err == nil {
				return filepath.Join(home, rest)
			}
		}
		return v
	}
	return v
}

// withConfigSource wraps flags so that altsrc can set them from the config
// file; the wrappers behave as the flags they hold.
func withConfigSource(flags []ucli.Flag) []ucli.Flag {
	out := make([]ucli.Flag, len(flags))
	for i, f := range flags {
		switch f := f.(type) {
		case *ucli.StringFlag:
			out[i] = altsrc.NewStringFlag(f)
		case *ucli.BoolFlag:
			out[i] = altsrc.NewBoolFlag(f)
		case *ucli.IntFlag:
			out[i] = altsrc.NewIntFlag(f)
		case *ucli.Int64Flag:
			out[i] = altsrc.NewInt64Flag(f)
		case *ucli.DurationFlag:
			out[i] = altsrc.NewDurationFlag(f)
		case *ucli.StringSliceFlag:
			out[i] = altsrc.NewStringSliceFlag(f)
		default:
			out[i] = f
		}
	}
	return out
}
