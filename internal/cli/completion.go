package cli

import (
	"fmt"
	"strings"

	ucli "github.com/urfave/cli/v2"
)

// shells are the shells `hookline completion` writes scripts for.
var shells = []string{"bash", "zsh", "fish", "powershell"}

// The bash, zsh and PowerShell scripts are urfave/cli v2's own
// (autocomplete/ in its module) with the program name filled in: they ask
// the binary itself (--generate-bash-completion, enabled on the app) for
// the words, so they follow the installed hookline. fish gets urfave/cli's
// generated script (App.ToFishCompletion).
const (
	bashScript = `# bash completion for hookline (urfave/cli v2's bash_autocomplete)
_cli_init_completion() {
  COMPREPLY=()
  _get_comp_words_by_ref "$@" cur prev words cword
}

_hookline() {
  if [[ "${COMP_WORDS[0]}" != "source" ]]; then
    local cur opts base words
    COMPREPLY=()
    cur="${COMP_WORDS[COMP_CWORD]}"
    if declare -F _init_completion >/dev/null 2>&1; then
      _init_completion -n "=:" || return
    elif declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
      _cli_init_completion -n "=:" || return
    else
      words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD
    fi
    words=("${words[@]:0:$cword}")
    if [[ "$cur" == "-"* ]]; then
      requestComp="HOOKLINE_COMPLETING_FLAG=1 ${words[*]} ${cur} --generate-bash-completion"
    else
      requestComp="${words[*]} --generate-bash-completion"
    fi
    opts=$(eval "${requestComp}" 2>/dev/null)
    COMPREPLY=($(compgen -W "${opts}" -- ${cur}))
    return 0
  fi
}

complete -o bashdefault -o default -o nospace -F _hookline hookline
`
	zshScript = `#compdef hookline
# zsh completion for hookline (urfave/cli v2's zsh_autocomplete)

_hookline() {
  local -a opts
  local cur
  cur=${words[-1]}
  if [[ "$cur" == "-"* ]]; then
    opts=("${(@f)$(HOOKLINE_COMPLETING_FLAG=1 ${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion)}")
  fi

  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}

compdef _hookline hookline
`
	powershellScript = `# PowerShell completion for hookline (urfave/cli v2's powershell_autocomplete.ps1)
Register-ArgumentCompleter -Native -CommandName hookline -ScriptBlock {
  param($commandName, $wordToComplete, $cursorPosition)
  $other = "$wordToComplete --generate-bash-completion"
  Invoke-Expression $other | ForEach-Object {
    [System.Management.Automation.CompletionResult]::new($_, $_, 'ParameterValue', $_)
  }
}
`
)

func completionCommand(s *streams) *ucli.Command {
	return &ucli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash, zsh, fish or powershell)",
		ArgsUsage: "bash|zsh|fish|powershell",
		Description: `Prints a script that completes hookline's commands and flags in your shell.
The bash, zsh and PowerShell scripts ask the installed hookline for the words
as you type; the fish script lists this binary's commands and flags, so
regenerate it after upgrading hookline.

   bash        source <(hookline completion bash)                  # in ~/.bashrc
   zsh         hookline completion zsh > "${fpath[1]}/_hookline"   # then restart zsh
   fish        hookline completion fish > ~/.config/fish/completions/hookline.fish
   powershell  hookline completion powershell | Out-String | Invoke-Expression   # in $PROFILE`,
		BashComplete: func(c *ucli.Context) {
			if c.NArg() == 0 {
				fmt.Fprintln(c.App.Writer, strings.Join(shells, "\n"))
			}
		},
		Action: func(c *ucli.Context) error {
			if c.NArg() != 1 {
				return usageErrorf("completion takes one shell: %s", strings.Join(shells, ", "))
			}
			var script string
			switch shell := c.Args().First(); shell {
			case "bash":
				script = bashScript
			case "zsh":
				script = zshScript
			case "powershell":
				script = powershellScript
			case "fish":
				fish, err := c.App.ToFishCompletion()
				if err != nil {
					return fmt.Errorf("writing the fish script: %w", err)
				}
				script = fish
			default:
				return usageErrorf("completion: unknown shell %q; want %s", shell, strings.Join(shells, ", "))
			}
			_, err := fmt.Fprint(s.out, script)
			return err
		},
	}
}
