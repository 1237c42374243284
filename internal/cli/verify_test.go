package cli

import (
	"strings"
	"testing"
)

func TestVerifyExitCodes(t *testing.T) {
	const (
		secret = "It's a Secret to Everybody"
		sig    = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	)
	file := writeFile(t, "payload", []byte("Hello, World!"))
	t.Setenv(secretEnv, "")
	tests := []struct {
		name     string
		stdin    string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{name: "valid file", args: []string{"--secret", secret, "--signature", sig, file}, wantOut: "valid: the signature matches\n"},
		{name: "valid stdin", stdin: "Hello, World!", args: []string{"--secret", secret, "-s", sig}, wantOut: "valid: the signature matches\n"},
		{name: "every SPEC vector", stdin: `{"foo":"bar"}`, args: []string{"--secret", "mysecret", "-s", "sha256=4864d2759938a15468b5df9ade20bf161da9b4f737ea61794142f3484236bda3", "-"}, wantOut: "valid: the signature matches\n"},
		{name: "other secret", args: []string{"--secret", "wrong", "--signature", sig, file}, wantCode: ExitFailure,
			wantErr: "hookline: signature does not match the payload and secret: check the secret, and that the payload is the exact body GitHub sent\n"},
		{name: "other payload", stdin: "Hello, World", args: []string{"--secret", secret, "--signature", sig}, wantCode: ExitFailure, wantErr: "does not match"},
		{name: "uppercase hex", args: []string{"--secret", secret, "--signature", strings.ToUpper(sig[:7]) + strings.ToUpper(sig[7:]), file}, wantCode: ExitUsage, wantErr: "a signature looks like sha256="},
		{name: "uppercase digits", args: []string{"--secret", secret, "--signature", "sha256=" + strings.ToUpper(sig[7:]), file}, wantCode: ExitUsage, wantErr: "must be lowercase"},
		{name: "sha1", args: []string{"--secret", secret, "--signature", "sha1=2aae6c35c94fcfb415dbe95f408b9ce91ee846ed", file}, wantCode: ExitUsage, wantErr: "legacy X-Hub-Signature (SHA-1)"},
		{name: "short", args: []string{"--secret", secret, "--signature", "sha256=abc", file}, wantCode: ExitUsage, wantErr: "3 hex digits after sha256=, want 64"},
		{name: "no signature", args: []string{"--secret", secret, file}, wantCode: ExitUsage, wantErr: "verify needs --signature"},
		{name: "no secret", args: []string{"--signature", sig, file}, wantCode: ExitUsage, wantErr: "verify needs the webhook secret"},
		{name: "missing file", args: []string{"--secret", secret, "--signature", sig, "/nonexistent/payload"}, wantCode: ExitUsage, wantErr: "/nonexistent/payload: no such file"},
		{name: "two files", args: []string{"--secret", secret, "--signature", sig, file, file}, wantCode: ExitUsage, wantErr: "verify takes one FILE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runStdin(t, tt.stdin, append([]string{"verify"}, tt.args...)...)
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d (stderr %q)", code, tt.wantCode, errOut)
			}
			if out != tt.wantOut {
				t.Errorf("stdout = %q, want %q", out, tt.wantOut)
			}
			if !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", errOut, tt.wantErr)
			}
			if tt.wantCode != ExitOK && strings.Contains(errOut, "newline") {
				t.Errorf("stderr = %q: a newline warning without a newline", errOut)
			}
		})
	}
}

func TestVerifyWarnsAboutATrailingNewline(t *testing.T) {
	const sig = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	for _, input := range []string{"Hello, World!\n", "Hello, World!\r\n"} {
		file := writeFile(t, "payload", []byte(input))
		code, out, errOut := run(t, "verify", "--secret", "It's a Secret to Everybody", "--signature", sig, file)
		if code != ExitFailure {
			t.Errorf("%q: exit code = %d, want 1 (the bytes are not trimmed)", input, code)
		}
		if out != "" {
			t.Errorf("%q: stdout = %q, want nothing", input, out)
		}
		if want := "warning: " + file + " ends with a newline that was not signed: the signature matches without it."; !strings.Contains(errOut, want) {
			t.Errorf("%q: stderr = %q, want it to contain %q", input, errOut, want)
		}
	}
	// The other way round: the signature covers the payload plus a newline
	// (from `printf 'Hello, World!\n' | openssl dgst -sha256 -hmac …`).
	signedWithNewline := writeFile(t, "payload", []byte("Hello, World!"))
	code, _, errOut := run(t, "verify", "--secret", "It's a Secret to Everybody", "--signature",
		"sha256=8fde2e970f9163923fb1cb61bb945626ff2b4091d87e622ee3ad600160592325", signedWithNewline)
	if want := "warning: the signature was made over " + signedWithNewline + " plus a final newline"; code != ExitFailure || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, stderr %q; want 1 and %q", code, errOut, want)
	}
	// No warning when the newline is not the reason.
	file := writeFile(t, "payload", []byte("Hello, World\n"))
	_, _, errOut = run(t, "verify", "--secret", "It's a Secret to Everybody", "--signature", sig, file)
	if strings.Contains(errOut, "warning") {
		t.Errorf("stderr = %q, want no newline warning", errOut)
	}
}
