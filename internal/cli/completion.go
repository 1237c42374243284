package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"

	ucli "github.com/urfave/cli/v2"
)

// shells are the shells `hookline completion` writes scripts for.
var shells = []string{"bash", "zsh", "fish", "powershell"}

func completionCommand(s *streams) *ucli.Command {
	return &ucli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash, zsh, fish or powershell)",
		ArgsUsage: "bash|zsh|fish|powershell",
		Description: `Prints a script that completes hookline's commands and flags in your shell.
The script is static: it is generated from this binary's commands and flags,
so regenerate it after upgrading hookline.

   bash        source <(hookline completion bash)                  # in ~/.bashrc
   zsh         hookline completion zsh > "${fpath[1]}/_hookline"   # then restart zsh
   fish        hookline completion fish > ~/.config/fish/completions/hookline.fish
   powershell  hookline completion powershell | Out-String | Invoke-Expression   # in $PROFILE`,
		Action: func(c *ucli.Context) error {
			shell, err := parseCompletion(c)
			if err != nil {
				return err
			}
			return runCompletion(shell, completionModel(c.App), s.out)
		},
	}
}

// parseCompletion returns the shell named by the one argument.
func parseCompletion(c *ucli.Context) (string, error) {
	if c.NArg() != 1 {
		return "", usageErrorf("completion takes one shell: %s", strings.Join(shells, ", "))
	}
	shell := c.Args().First()
	for _, sh := range shells {
		if shell == sh {
			return shell, nil
		}
	}
	return "", usageErrorf("completion: unknown shell %q; want %s", shell, strings.Join(shells, ", "))
}

// runCompletion writes the completion script of shell for the commands in m.
func runCompletion(shell string, m []complCommand, w io.Writer) error {
	var script string
	switch shell {
	case "bash":
		script = bashCompletion(m)
	case "zsh":
		script = zshCompletion(m)
	case "fish":
		script = fishCompletion(m)
	case "powershell":
		script = powershellCompletion(m)
	}
	_, err := io.WriteString(w, script)
	return err
}

// complCommand is what completion knows about one command; the first one,
// with no names, stands for hookline itself (the global flags).
type complCommand struct {
	names []string
	usage string
	flags []complFlag
	words []string // fixed values of the arguments (the shells, for completion)
	files bool     // the arguments are files
}

// complFlag is one flag of a command.
type complFlag struct {
	names       []string // without dashes, the long name first
	usage       string   // without the placeholder's backquotes
	placeholder string   // the value's name in usage, such as URL; "" if none
	value       bool     // takes a value
	file        bool     // the value is a file or directory
	repeat      bool
}

// flagPlaceholder returns the first back-quoted word of a flag's usage, the
// name urfave/cli shows for its value ("" when there is none).
func flagPlaceholder(usage string) string {
	_, rest, ok := strings.Cut(usage, "`")
	if !ok {
		return ""
	}
	name, _, ok := strings.Cut(rest, "`")
	if !ok {
		return ""
	}
	return name
}

// dashed returns the flag's names with their dashes.
func (f complFlag) dashed() []string {
	out := make([]string, len(f.names))
	for i, n := range f.names {
		out[i] = dash(n)
	}
	return out
}

func dash(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// completionModel reads the commands and flags of app, which has been set up
// (it is running).
func completionModel(app *ucli.App) []complCommand {
	m := []complCommand{{flags: complFlags(app.VisibleFlags())}}
	for _, cmd := range app.VisibleCommands() {
		c := complCommand{names: cmd.Names(), usage: cmd.Usage, flags: complFlags(cmd.VisibleFlags())}
		if cmd.Name == "completion" {
			c.words = shells
		} else {
			c.files = strings.Contains(cmd.ArgsUsage, "FILE") || strings.Contains(cmd.ArgsUsage, "PATH")
		}
		m = append(m, c)
	}
	// The help flag is added to a command only when it runs.
	for i := range m {
		if !hasFlag(m[i].flags, "help") {
			m[i].flags = append(m[i].flags, complFlag{names: []string{"help", "h"}, usage: "show help"})
		}
	}
	return m
}

func hasFlag(flags []complFlag, name string) bool {
	for _, f := range flags {
		if f.names[0] == name {
			return true
		}
	}
	return false
}

func complFlags(flags []ucli.Flag) []complFlag {
	var out []complFlag
	for _, f := range flags {
		df, ok := f.(ucli.DocGenerationFlag)
		if !ok {
			continue
		}
		names := append([]string(nil), f.Names()...)
		sort.SliceStable(names, func(i, j int) bool { return len(names[i]) > 1 && len(names[j]) == 1 })
		cf := complFlag{names: names, usage: df.GetUsage(), value: df.TakesValue()}
		if sf, ok := f.(ucli.DocGenerationSliceFlag); ok {
			cf.repeat = sf.IsSliceFlag()
		}
		placeholder := flagPlaceholder(cf.usage)
		cf.file = placeholder == "FILE" || placeholder == "DIR"
		if sf, ok := f.(*ucli.StringFlag); ok && sf.TakesFile {
			cf.file = true
		}
		cf.placeholder = placeholder
		cf.usage = strings.ReplaceAll(cf.usage, "`", "")
		out = append(out, cf)
	}
	return out
}

// commandWords returns the words that may follow hookline: every command name.
func commandWords(m []complCommand) []string {
	var words []string
	for _, c := range m[1:] {
		words = append(words, c.names...)
	}
	return words
}

// flagWords returns every dashed name of flags.
func flagWords(flags []complFlag) []string {
	var words []string
	for _, f := range flags {
		words = append(words, f.dashed()...)
	}
	return words
}

// bashCompletion completes commands, flags and the completion command's
// shells; everything else (flag values, file arguments) falls back to bash's
// default file name completion.
func bashCompletion(m []complCommand) string {
	var b strings.Builder
	b.WriteString(`# bash completion for hookline, generated by "hookline completion bash".
# Load it with: source <(hookline completion bash)
_hookline() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local cmd= i words= values= flags=
    COMPREPLY=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
        -*) ;;
        *) cmd=${COMP_WORDS[i]}; break ;;
        esac
    done
    case $cmd in
`)
	for _, c := range m {
		pattern := `""`
		if len(c.names) > 0 {
			pattern = strings.Join(c.names, "|")
		}
		var values []string
		for _, f := range c.flags {
			if f.value {
				values = append(values, f.dashed()...)
			}
		}
		words := c.words
		if len(c.names) == 0 {
			words = commandWords(m)
		}
		fmt.Fprintf(&b, "    %s)\n        values='%s'\n        words='%s'\n        flags='%s'\n        ;;\n",
			pattern, strings.Join(values, " "), strings.Join(words, " "), strings.Join(flagWords(c.flags), " "))
	}
	b.WriteString(`    *) return ;;
    esac
    for i in $values; do
        [[ $prev == "$i" ]] && return # a flag value: files, by default
    done
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    elif [[ -n $words ]]; then
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
    fi
}
complete -o bashdefault -o default -F _hookline hookline
`)
	return b.String()
}

// zshQuote makes s safe inside single quotes.
func zshQuote(s string) string {
	return strings.ReplaceAll(s, "'", `'\''`)
}

// zshDesc makes s safe as the [description] of an _arguments spec.
func zshDesc(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, "[", `\[`)
	return zshQuote(strings.ReplaceAll(s, "]", `\]`))
}

// zshField makes s safe as a colon-separated field of an _arguments spec or
// a _describe item.
func zshField(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	return zshQuote(strings.ReplaceAll(s, ":", `\:`))
}

// zshFlagSpecs returns the _arguments specs of flags.
func zshFlagSpecs(flags []complFlag) []string {
	var specs []string
	for _, f := range flags {
		names := f.dashed()
		prefix := ""
		switch {
		case f.repeat:
			prefix = "*"
		case len(names) > 1:
			prefix = "(" + strings.Join(names, " ") + ")"
		}
		spec := "'" + prefix + names[0]
		if len(names) > 1 {
			spec = "'" + prefix + "'{" + strings.Join(names, ",") + "}'"
		}
		spec += "[" + zshDesc(f.usage) + "]"
		if f.value {
			placeholder := f.placeholder
			if placeholder == "" {
				placeholder = "value"
			}
			action := " "
			if f.file {
				action = "_files"
			}
			spec += ":" + zshField(placeholder) + ":" + action
		}
		specs = append(specs, spec+"'")
	}
	return specs
}

func zshCompletion(m []complCommand) string {
	var b strings.Builder
	b.WriteString(`#compdef hookline
# zsh completion for hookline, generated by "hookline completion zsh".
# Put it on $fpath as _hookline, or: source <(hookline completion zsh)
compdef _hookline hookline

_hookline() {
    local curcontext=$curcontext state line
    local -a commands
    commands=(
`)
	for _, c := range m[1:] {
		for _, n := range c.names {
			fmt.Fprintf(&b, "        '%s:%s'\n", zshField(n), zshQuote(c.usage))
		}
	}
	b.WriteString("    )\n    _arguments -C \\\n")
	for _, spec := range zshFlagSpecs(m[0].flags) {
		fmt.Fprintf(&b, "        %s \\\n", spec)
	}
	b.WriteString(`        '1: :->command' \
        '*:: :->argument'
    case $state in
    command) _describe -t commands 'hookline command' commands ;;
    argument)
        case $line[1] in
`)
	for _, c := range m[1:] {
		fmt.Fprintf(&b, "        %s)\n            _arguments \\\n", strings.Join(c.names, "|"))
		for _, spec := range zshFlagSpecs(c.flags) {
			fmt.Fprintf(&b, "                %s \\\n", spec)
		}
		switch {
		case len(c.words) > 0:
			fmt.Fprintf(&b, "                '1:shell:(%s)'\n", strings.Join(c.words, " "))
		case c.files:
			b.WriteString("                '*:file:_files'\n")
		default:
			b.WriteString("                && return\n")
		}
		b.WriteString("            ;;\n")
	}
	b.WriteString(`        esac
        ;;
    esac
}

if [ "$funcstack[1]" = "_hookline" ]; then
    _hookline "$@"
fi
`)
	return b.String()
}

// fishEscape makes s safe inside a single-quoted fish string.
func fishEscape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	return strings.ReplaceAll(s, "'", `\'`)
}

func fishCompletion(m []complCommand) string {
	var b strings.Builder
	b.WriteString(`# fish completion for hookline, generated by "hookline completion fish".
# Save it as ~/.config/fish/completions/hookline.fish
complete -c hookline -e
`)
	for _, c := range m {
		cond := "__fish_use_subcommand"
		if len(c.names) > 0 {
			cond = "__fish_seen_subcommand_from " + strings.Join(c.names, " ")
			if !c.files {
				fmt.Fprintf(&b, "complete -c hookline -n '%s' -f\n", cond)
			}
		}
		for _, f := range c.flags {
			fmt.Fprintf(&b, "complete -c hookline -n '%s'", cond)
			for _, n := range f.names {
				if len(n) == 1 {
					fmt.Fprintf(&b, " -s %s", n)
				} else {
					fmt.Fprintf(&b, " -l %s", n)
				}
			}
			switch {
			case f.file:
				b.WriteString(" -r -F")
			case f.value:
				b.WriteString(" -x")
			}
			fmt.Fprintf(&b, " -d '%s'\n", fishEscape(f.usage))
		}
		if len(c.words) > 0 {
			fmt.Fprintf(&b, "complete -c hookline -n '%s' -a '%s'\n", cond, strings.Join(c.words, " "))
		}
	}
	for _, c := range m[1:] {
		for _, n := range c.names {
			fmt.Fprintf(&b, "complete -c hookline -n __fish_use_subcommand -f -a %s -d '%s'\n", n, fishEscape(c.usage))
		}
	}
	return b.String()
}

// powershellCompletion completes commands, flags and the completion
// command's shells; PowerShell completes file names when it offers nothing.
func powershellCompletion(m []complCommand) string {
	quote := func(words []string) string {
		q := make([]string, len(words))
		for i, w := range words {
			q[i] = "'" + strings.ReplaceAll(w, "'", "''") + "'"
		}
		return "@(" + strings.Join(q, ", ") + ")"
	}
	var b strings.Builder
	b.WriteString(`# PowerShell completion for hookline, generated by "hookline completion powershell".
# Load it in $PROFILE with: hookline completion powershell | Out-String | Invoke-Expression
Register-ArgumentCompleter -Native -CommandName 'hookline', 'hookline.exe' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)
    $words = @{
`)
	for _, c := range m[1:] {
		words := append(append([]string(nil), c.words...), flagWords(c.flags)...)
		for _, n := range c.names {
			fmt.Fprintf(&b, "        '%s' = %s\n", n, quote(words))
		}
	}
	fmt.Fprintf(&b, "    }\n    $top = %s\n", quote(append(commandWords(m), flagWords(m[0].flags)...)))
	b.WriteString(`    $candidates = $top
    foreach ($element in $commandAst.CommandElements | Select-Object -Skip 1) {
        if ($element.Extent.EndOffset -ge $cursorPosition) { break }
        $text = $element.ToString()
        if ($words.ContainsKey($text)) { $candidates = $words[$text]; break }
    }
    $candidates | Where-Object { $_ -like "$wordToComplete*" } | ForEach-Object {
        [System.Management.Automation.CompletionResult]::new($_, $_, 'ParameterValue', $_)
    }
}
`)
	return b.String()
}
