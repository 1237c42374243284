package cli

import (
	"io"
	"os"

	"github.com/fatih/color"
	"github.com/mattn/go-isatty"
)

// streams are the injected standard streams of one Run, with the colour
// decision made once per output stream.
type streams struct {
	in       io.Reader
	out, err io.Writer

	// outColor and errColor say whether escape codes may be written to out
	// and err. They are decided once, in the app's Before hook.
	outColor, errColor bool
	// noColor records the --no-color flag the decision was made with.
	noColor bool
}

// decideColor sets the colour decision for both output streams.
func (s *streams) decideColor(noColorFlag bool) {
	s.noColor = noColorFlag
	_, noColorEnv := os.LookupEnv("NO_COLOR")
	s.outColor = useColor(noColorFlag, noColorEnv, isTerminal(s.out))
	s.errColor = useColor(noColorFlag, noColorEnv, isTerminal(s.err))
}

// useColor is the colour rule: colour only on a terminal, and never when the
// user said --no-color or set NO_COLOR (to any value, even empty, as
// https://no-color.org asks).
func useColor(noColorFlag, noColorEnv, terminal bool) bool {
	return terminal && !noColorFlag && !noColorEnv
}

// isTerminal reports whether w is a terminal (a character device on Unix, a
// console or Cygwin pty on Windows).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

// paint returns a colour for one stream: escape codes are emitted only when
// enabled is true, whatever fatih/color's package-level NoColor says.
func paint(enabled bool, attrs ...color.Attribute) *color.Color {
	c := color.New(attrs...)
	if enabled {
		c.EnableColor()
	} else {
		c.DisableColor()
	}
	return c
}
