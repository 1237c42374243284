package cli

import (
	"strings"
	"testing"
)

// signVectors are SPEC 4.1's known answers.
var signVectors = []struct {
	secret, payload, want string
}{
	{"It's a Secret to Everybody", "Hello, World!", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"},
	{"mysecret", `{"foo":"bar"}`, "sha256=4864d2759938a15468b5df9ade20bf161da9b4f737ea61794142f3484236bda3"},
	{"secret", "data", "sha256=1b2c16b75bd2a870c114153ccda5bcfca63314bc722fa160d690de133ccbb9db"},
	{"0123456789abcdef", `{"yo":true}`, "sha256=b1f8020f5b4cd42042f807dd939015c4a418bc1ff7f604dd55b0a19b5d953d9b"},
}

func TestSignVectors(t *testing.T) {
	for _, v := range signVectors {
		t.Run(v.secret, func(t *testing.T) {
			file := writeFile(t, "payload", []byte(v.payload))
			for _, args := range [][]string{
				{"sign", "--secret", v.secret, file},
				{"sign", "--secret", v.secret, "-"},
				{"sign", "--secret", v.secret},
			} {
				code, out, errOut := runStdin(t, v.payload, args...)
				if code != ExitOK || out != v.want+"\n" || errOut != "" {
					t.Errorf("%q = %d, %q, %q; want 0, %q, no stderr", args, code, out, errOut, v.want+"\n")
				}
			}
		})
	}
}

func TestSignKeepsTrailingNewline(t *testing.T) {
	// "Hello, World!\n" is a different payload: its signature differs from
	// the vector's, and sign says why.
	code, out, errOut := runStdin(t, "Hello, World!\n", "sign", "--secret", "It's a Secret to Everybody")
	if code != ExitOK {
		t.Fatalf("exit code = %d, want 0", code)
	}
	if out == "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17\n" {
		t.Errorf("sign trimmed the trailing newline")
	}
	if !strings.Contains(errOut, "stdin ends with a newline, which is signed too") {
		t.Errorf("stderr = %q, want a note about the newline", errOut)
	}
}

func TestSignSecretSources(t *testing.T) {
	const want = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17\n"
	crlf := writeFile(t, "secret-crlf", []byte("It's a Secret to Everybody\r\n"))
	lf := writeFile(t, "secret-lf", []byte("It's a Secret to Everybody\n"))
	bare := writeFile(t, "secret", []byte("It's a Secret to Everybody"))
	wrong := writeFile(t, "wrong", []byte("wrong\n"))
	empty := writeFile(t, "empty", []byte("\n"))
	tests := []struct {
		name     string
		env      string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{name: "environment", env: "It's a Secret to Everybody", wantOut: want},
		{name: "file with LF", args: []string{"--secret-file", lf}, wantOut: want},
		{name: "file with CRLF", args: []string{"--secret-file", crlf}, wantOut: want},
		{name: "file without newline", args: []string{"--secret-file", bare}, wantOut: want},
		{name: "flag beats environment", env: "wrong", args: []string{"--secret", "It's a Secret to Everybody"}, wantOut: want},
		{name: "file beats environment", env: "wrong", args: []string{"--secret-file", bare}, wantOut: want},
		{name: "both flags", args: []string{"--secret", "x", "--secret-file", wrong}, wantCode: ExitUsage, wantErr: "not both"},
		{name: "empty file", args: []string{"--secret-file", empty}, wantCode: ExitUsage, wantErr: "--secret-file: the file is empty"},
		{name: "missing file", args: []string{"--secret-file", "It's a Secret"}, wantCode: ExitUsage, wantErr: "the flag takes the path of a file holding the secret"},
		{name: "empty flag", args: []string{"--secret", ""}, wantCode: ExitUsage, wantErr: "--secret is empty"},
		{name: "none", wantCode: ExitUsage, wantErr: "sign needs the webhook secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(secretEnv, tt.env)
			code, out, errOut := runStdin(t, "Hello, World!", append([]string{"sign"}, tt.args...)...)
			if code != tt.wantCode || out != tt.wantOut || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("sign %q = %d, %q, %q; want %d, %q, stderr containing %q", tt.args, code, out, errOut, tt.wantCode, tt.wantOut, tt.wantErr)
			}
			if strings.Contains(errOut, "Secret") {
				t.Errorf("stderr %q repeats the secret", errOut)
			}
		})
	}
}

func TestSignUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"sign", "--secret", "s", "a", "b"},
		{"sign", "--secret", "s", "/nonexistent/payload.json"},
	} {
		if code, _, _ := run(t, args...); code != ExitUsage {
			t.Errorf("%q: exit code = %d, want 2", args, code)
		}
	}
}
