package signature_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/hookline/hookline/webhooks/internal/signature"
)

// vectors are the known answers of SPEC 4.1 (the first is GitHub's published
// example); never recompute them with the code under test.
var vectors = []struct {
	name, secret, payload, sig string
}{
	{"github docs", "It's a Secret to Everybody", "Hello, World!", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"},
	{"json object", "mysecret", `{"foo":"bar"}`, "sha256=4864d2759938a15468b5df9ade20bf161da9b4f737ea61794142f3484236bda3"},
	{"short", "secret", "data", "sha256=1b2c16b75bd2a870c114153ccda5bcfca63314bc722fa160d690de133ccbb9db"},
	{"octokit fixture", "0123456789abcdef", `{"yo":true}`, "sha256=b1f8020f5b4cd42042f807dd939015c4a418bc1ff7f604dd55b0a19b5d953d9b"},
}

func TestSign(t *testing.T) {
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			got, err := signature.Sign(v.secret, []byte(v.payload))
			if err != nil {
				t.Fatalf("Sign(%q, %q) error = %v", v.secret, v.payload, err)
			}
			if got != v.sig {
				t.Errorf("Sign(%q, %q) = %q, want %q", v.secret, v.payload, got, v.sig)
			}
		})
	}
}

func TestSignEmptyPayload(t *testing.T) {
	// HMAC-SHA256 of the empty message under "secret" (RFC 2104 construction,
	// value from `printf '' | openssl dgst -sha256 -hmac secret`).
	const want = "sha256=f9e66e179b6747ae54108f82f8ade8b3c25d76fd30afde6c395822c530196169"
	got, err := signature.Sign("secret", []byte{})
	if err != nil || got != want {
		t.Errorf("Sign(%q, []byte{}) = %q, %v; want %q, nil", "secret", got, err, want)
	}
}

func TestSignErrors(t *testing.T) {
	tests := []struct {
		name    string
		secret  string
		payload []byte
		want    error
	}{
		{"empty secret", "", []byte("data"), signature.ErrMissingSecret},
		{"nil payload", "secret", nil, signature.ErrMissingPayload},
		{"both missing reports secret", "", nil, signature.ErrMissingSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := signature.Sign(tt.secret, tt.payload)
			if !errors.Is(err, tt.want) {
				t.Errorf("Sign(%q, %q) error = %v, want %v", tt.secret, tt.payload, err, tt.want)
			}
			if got != "" {
				t.Errorf("Sign(%q, %q) = %q, want empty on error", tt.secret, tt.payload, got)
			}
		})
	}
}

func TestVerify(t *testing.T) {
	const (
		secret  = "It's a Secret to Everybody"
		payload = "Hello, World!"
		good    = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	)
	tests := []struct {
		name    string
		secret  string
		payload string
		sig     string
		want    bool
	}{
		{"exact", secret, payload, good, true},
		{"uppercase hex", secret, payload, "sha256=757107EA0EB2509FC211221CCE984B8A37570B6D7586C22C46F4379C8B043E17", false},
		{"one uppercase digit", secret, payload, "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043E17", false},
		{"uppercase prefix", secret, payload, "SHA256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", false},
		{"sha1 prefix", secret, payload, "sha1=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", false},
		{"sha1 length", secret, payload, "sha1=0123456789abcdef0123456789abcdef01234567", false},
		{"no prefix", secret, payload, "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", false},
		{"one digit short", secret, payload, "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e1", false},
		{"one digit long", secret, payload, "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e170", false},
		{"trailing newline", secret, payload, good + "\n", false},
		{"leading space", secret, payload, " " + good, false},
		{"last digit flipped", secret, payload, "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e18", false},
		{"other payload", secret, "Hello, World?", good, false},
		{"other secret", "It's a secret to everybody", payload, good, false},
		{"prefix only", secret, payload, "sha256=", false},
		{"not hex", secret, payload, "sha256=" + strings.Repeat("z", 64), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := signature.Verify(tt.secret, []byte(tt.payload), tt.sig)
			if err != nil {
				t.Fatalf("Verify(%q) error = %v, want nil", tt.sig, err)
			}
			if got != tt.want {
				t.Errorf("Verify(%q) = %v, want %v", tt.sig, got, tt.want)
			}
		})
	}
	for _, v := range vectors {
		t.Run("vector "+v.name, func(t *testing.T) {
			got, err := signature.Verify(v.secret, []byte(v.payload), v.sig)
			if err != nil || !got {
				t.Errorf("Verify(%q, %q, %q) = %v, %v; want true, nil", v.secret, v.payload, v.sig, got, err)
			}
		})
	}
}

func TestVerifyErrors(t *testing.T) {
	const sig = "sha256=1b2c16b75bd2a870c114153ccda5bcfca63314bc722fa160d690de133ccbb9db"
	tests := []struct {
		name    string
		secret  string
		payload []byte
		sig     string
		want    error
	}{
		{"empty secret", "", []byte("data"), sig, signature.ErrMissingSecret},
		{"nil payload", "secret", nil, sig, signature.ErrMissingPayload},
		{"empty signature", "secret", []byte("data"), "", signature.ErrMissingSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := signature.Verify(tt.secret, tt.payload, tt.sig)
			if !errors.Is(err, tt.want) {
				t.Errorf("Verify(%q) error = %v, want %v", tt.sig, err, tt.want)
			}
			if got {
				t.Errorf("Verify(%q) = true on error", tt.sig)
			}
			got, err = signature.VerifyWithFallback(tt.secret, tt.payload, tt.sig, "other")
			if !errors.Is(err, tt.want) || got {
				t.Errorf("VerifyWithFallback(%q) = %v, %v; want false, %v", tt.sig, got, err, tt.want)
			}
		})
	}
}

func TestVerifyWithFallback(t *testing.T) {
	const (
		payload = "data"
		sig     = "sha256=1b2c16b75bd2a870c114153ccda5bcfca63314bc722fa160d690de133ccbb9db" // secret "secret"
	)
	tests := []struct {
		name       string
		secret     string
		additional []string
		want       bool
		wantErr    error
	}{
		{"primary matches", "secret", nil, true, nil},
		{"primary matches, additional ignored", "secret", []string{""}, true, nil},
		{"no additional", "old", nil, false, nil},
		{"first additional matches", "new", []string{"secret"}, true, nil},
		{"last additional matches", "new", []string{"a", "b", "secret"}, true, nil},
		{"none matches", "new", []string{"a", "b"}, false, nil},
		{"empty additional before match", "new", []string{"", "secret"}, false, signature.ErrMissingSecret},
		{"empty additional after match", "new", []string{"secret", ""}, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := signature.VerifyWithFallback(tt.secret, []byte(payload), sig, tt.additional...)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("VerifyWithFallback(%q, %q) error = %v, want %v", tt.secret, tt.additional, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("VerifyWithFallback(%q, %q) = %v, want %v", tt.secret, tt.additional, got, tt.want)
			}
		})
	}
}

func TestConstants(t *testing.T) {
	if signature.Prefix != "sha256=" || signature.Length != 71 {
		t.Errorf("Prefix, Length = %q, %d; want %q, 71", signature.Prefix, signature.Length, "sha256=")
	}
}

// FuzzVerify checks that Verify never panics, never returns an error for
// present arguments, and accepts a signature only if it is the one Sign
// produces, which in turn always verifies.
//
// Run: go test ./webhooks/signature -run '^$' -fuzz '^FuzzVerify$' -fuzztime 30s
func FuzzVerify(f *testing.F) {
	for _, v := range vectors {
		f.Add(v.secret, []byte(v.payload), v.sig)
		f.Add(v.secret, []byte(v.payload), strings.ToUpper(v.sig))
		f.Add(v.secret, []byte(v.payload), "sha1="+v.sig[len("sha256="):])
	}
	f.Add("s", []byte{}, "sha256=")
	f.Fuzz(func(t *testing.T, secret string, payload []byte, sig string) {
		ok, err := signature.Verify(secret, payload, sig)
		if secret == "" || payload == nil || sig == "" {
			if err == nil || ok {
				t.Fatalf("Verify(%q, %q, %q) = %v, %v; want false and an error", secret, payload, sig, ok, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Verify(%q, %q, %q) error = %v", secret, payload, sig, err)
		}
		// Independent oracle: the standard library directly.
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(payload)
		want := "sha256=" + hexLower(mac.Sum(nil))
		if ok != (sig == want) {
			t.Fatalf("Verify(%q, %q, %q) = %v, want %v", secret, payload, sig, ok, sig == want)
		}
		signed, err := signature.Sign(secret, payload)
		if err != nil || signed != want {
			t.Fatalf("Sign(%q, %q) = %q, %v; want %q", secret, payload, signed, err, want)
		}
	})
}

func hexLower(b []byte) string {
	const digits = "0123456789abcdef"
	var sb strings.Builder
	for _, c := range b {
		sb.WriteByte(digits[c>>4])
		sb.WriteByte(digits[c&0xf])
	}
	return sb.String()
}
