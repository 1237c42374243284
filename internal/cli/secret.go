package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/hookline/hookline/internal/httpx"
	"github.com/hookline/hookline/webhooks/provider"
)

// secretEnv is the environment variable that holds the webhook secret.
const secretEnv = "HOOKLINE_SECRET"

// maxSecretFile bounds what --secret-file reads: a secret is short, a large
// file is a mistake (a payload given as the secret file, say).
const maxSecretFile = 64 << 10

// secretFlagValues are what --secret (repeatable: one secret, and
// PROVIDER=SECRET ones) and --secret-file hold.
type secretFlagValues struct {
	secrets ucli.StringSlice
	file    string
}

// secretFlags returns the flags every command that takes a webhook secret
// shares: --secret and --secret-file, bound to v. usage says what the
// secret does for this command. Read the secret with readSecret.
//
// The secret is never printed: not in errors, not in -v output, not in the
// trace. urfave/cli shows no default or environment value for these flags
// (they have neither), so help cannot leak it either.
func secretFlags(usage string, v *secretFlagValues) []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringSliceFlag{
			Name:        "secret",
			Usage:       usage + " (or --secret-file, or $" + secretEnv + ": a flag shows in ps); PROVIDER=SECRET, repeatable, is one sender's (stripe=whsec_…)",
			Destination: &v.secrets,
		},
		&ucli.StringFlag{
			Name:        "secret-file",
			Usage:       "read the webhook secret from `FILE` (trailing newlines are trimmed)",
			TakesFile:   true,
			Destination: &v.file,
		},
	}
}

// readSecret returns the webhook secret from, in this order, --secret,
// --secret-file or $HOOKLINE_SECRET; "" when none is given (an empty
// HOOKLINE_SECRET counts as none). Giving both flags, an empty --secret or
// an empty or unreadable file is a usage error. Errors never contain the
// secret.
//
// The command line beats the environment, so `HOOKLINE_SECRET=a hookline
// sign --secret-file b` uses b. A secret file has its trailing "\n" and
// "\r\n" removed (editors and `echo` add one); any other whitespace is part
// of the secret.
func readSecret(c *ucli.Context, v *secretFlagValues) (string, error) {
	secret, err := readSecretValue(c, v)
	// Warned where real deliveries are checked; sign, verify and send
	// compute with whatever secret a test uses.
	receives := c.Command.Name == "forward" || c.Command.Name == "replay" || c.Command.Name == "deliveries"
	if err == nil && receives && secret != "" && len(secret) < minMaskedSecret {
		fmt.Fprintf(c.App.ErrWriter, "warning: the secret is %s long; use a long random one (openssl rand -hex 20): a short secret is guessable, and hookline can hide it in messages only where it stands alone\n", plural(len(secret), "character", "characters"))
	}
	return secret, err
}

func readSecretValue(c *ucli.Context, v *secretFlagValues) (string, error) {
	flagSet, fileSet := c.IsSet("secret"), c.IsSet("secret-file")
	plain, _, err := v.split()
	switch {
	case err != nil:
		return "", err
	case flagSet && fileSet && plain != "":
		return "", usageErrorf("give the secret with --secret or --secret-file, not both")
	case plain != "":
		return plain, nil
	case fileSet:
		return readSecretFile(v.file)
	case flagSet:
		return "", nil // only PROVIDER=SECRET ones
	}
	return os.Getenv(secretEnv), nil
}

// split returns --secret's one secret for every sender, and its
// PROVIDER=SECRET ones. A value is a provider's only when what is before
// its first = names a provider: "abc=" (base64 padding) is one secret.
func (v *secretFlagValues) split() (plain string, byScheme map[provider.Scheme][]string, err error) {
	for _, val := range v.secrets.Value() {
		if name, secret, ok := strings.Cut(val, "="); ok {
			if s, perr := provider.Parse(name); perr == nil {
				if secret == "" {
					return "", nil, usageErrorf("--secret %s= has no secret after the =", name)
				}
				if byScheme == nil {
					byScheme = map[provider.Scheme][]string{}
				}
				byScheme[s] = append(byScheme[s], secret)
				continue
			}
		}
		switch {
		case val == "":
			return "", nil, usageErrorf("--secret is empty; give the webhook's secret, or leave the flag out")
		case plain != "":
			return "", nil, usageErrorf("--secret is given twice without a provider; give one secret for every sender, and PROVIDER=SECRET for the others")
		}
		plain = val
	}
	return plain, byScheme, nil
}

// sendSecretHint returns how a `hookline send` suggested to the user passes
// the secret this command got, the way the user gave it: "--secret-file F"
// for a file, "HOOKLINE_SECRET=… " (a prefix) for the environment, and for
// --secret a placeholder, as hookline never prints a secret. The first
// result goes before the command, the second among its flags.
func sendSecretHint(c *ucli.Context, v *secretFlagValues) (prefix, flag string) {
	switch {
	case c.IsSet("secret"):
		return "", " --secret <the same secret>"
	case c.IsSet("secret-file"):
		return "", " --secret-file " + v.file
	case os.Getenv(secretEnv) != "":
		return secretEnv + "=… ", ""
	}
	return "", ""
}

// readSecretFile reads a secret from path, trimming trailing newlines.
func readSecretFile(path string) (string, error) {
	if path == "" {
		return "", usageErrorf("--secret-file is empty; give the path of a file holding the secret")
	}
	// The path is not repeated in errors: a common slip is to give the
	// secret itself to --secret-file.
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", usageErrorf("--secret-file: no such file (the flag takes the path of a file holding the secret, not the secret itself)")
	}
	if err != nil {
		return "", usageErrorf("--secret-file: %v", pathless(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return "", usageErrorf("--secret-file: %v", pathless(err))
	}
	if len(data) > maxSecretFile {
		return "", usageErrorf("--secret-file: the file is larger than %d KiB; is it the right file?", maxSecretFile>>10)
	}
	secret := strings.TrimRight(string(data), "\r\n")
	if secret == "" {
		return "", usageErrorf("--secret-file: the file is empty")
	}
	return secret, nil
}

// pathless returns the cause of a *fs.PathError without its path.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// redactSecret replaces every occurrence of secret in s, for text that
// comes from elsewhere (a target's response, an error from a library) and
// could, in theory, echo it.
//
// A secret of minMaskedSecret characters or more is replaced wherever it
// stands. A shorter one ("s", "test") is replaced only where it stands as a
// whole value, not inside a word: masking every "s" turned "send needs
// --event" into "[secret]end need[secret] --event". Such a secret gets one
// warning when it is read instead (readSecret).
func redactSecret(s, secret string) string {
	if secret == "" {
		return s
	}
	if len(secret) >= minMaskedSecret {
		return strings.ReplaceAll(s, secret, "[secret]")
	}
	var b strings.Builder
	for {
		i := strings.Index(s, secret)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := i + len(secret)
		whole := (i == 0 || !isWordByte(s[i-1])) && (end == len(s) || !isWordByte(s[end]))
		b.WriteString(s[:i])
		if whole {
			b.WriteString("[secret]")
		} else {
			b.WriteString(s[i:end])
		}
		s = s[end:]
	}
}

// minMaskedSecret is the length from which a secret is masked wherever it
// appears in a message, and below which it gets a warning: GitHub's own
// advice is a long random string, and forges generate 20 characters or more.
const minMaskedSecret = 8

func isWordByte(c byte) bool {
	return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// redactEcho removes from text (a target's answer or an error, which may
// echo the request) the secrets and the values of the sensitive headers in
// header (Authorization, Cookie...), whole and as the credential after
// their scheme ("Bearer <token>").
func redactEcho(text string, secrets []string, header http.Header) string {
	for _, s := range secrets {
		text = redactSecret(text, s)
	}
	for name, vs := range header {
		if !httpx.IsCredentialHeader(name) {
			continue
		}
		for _, v := range vs {
			if v = strings.TrimSpace(v); v == "" {
				continue
			}
			text = strings.ReplaceAll(text, v, "[redacted]")
			if _, cred, ok := strings.Cut(v, " "); ok && len(strings.TrimSpace(cred)) >= 4 {
				text = strings.ReplaceAll(text, strings.TrimSpace(cred), "[redacted]")
			}
		}
	}
	return text
}

// errRedacted returns err with every occurrence of secret in its message
// replaced, keeping its exit code class (usage or failure).
func errRedacted(err error, secret string) error {
	if err == nil || secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	msg := redactSecret(err.Error(), secret)
	var ue *usageError
	if errors.As(err, &ue) {
		return usageErrorf("%s", msg)
	}
	var ce *codeError
	if errors.As(err, &ce) {
		return &codeError{code: ce.code, err: errors.New(msg), silent: ce.silent}
	}
	return errors.New(msg)
}
