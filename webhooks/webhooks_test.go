package webhooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookline/hookline/webhooks"
	"github.com/hookline/hookline/webhooks/internal/signature"
)

// The SPEC 4.1 vectors, as literals.
var vectors = []struct {
	name, secret, payload, sig string
}{
	{"github docs", "It's a Secret to Everybody", "Hello, World!", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"},
	{"json object", "mysecret", `{"foo":"bar"}`, "sha256=4864d2759938a15468b5df9ade20bf161da9b4f737ea61794142f3484236bda3"},
	{"short", "secret", "data", "sha256=1b2c16b75bd2a870c114153ccda5bcfca63314bc722fa160d690de133ccbb9db"},
	{"octokit fixture", "0123456789abcdef", `{"yo":true}`, "sha256=b1f8020f5b4cd42042f807dd939015c4a418bc1ff7f604dd55b0a19b5d953d9b"},
}

func TestSignVerifyReexports(t *testing.T) {
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			got, err := webhooks.Sign(v.secret, []byte(v.payload))
			if err != nil || got != v.sig {
				t.Errorf("Sign(%q, %q) = %q, %v; want %q", v.secret, v.payload, got, err, v.sig)
			}
			ok, err := webhooks.Verify(v.secret, []byte(v.payload), v.sig)
			if err != nil || !ok {
				t.Errorf("Verify(%q) = %v, %v; want true", v.sig, ok, err)
			}
			ok, err = webhooks.VerifyWithFallback("wrong", []byte(v.payload), v.sig, "also wrong", v.secret)
			if err != nil || !ok {
				t.Errorf("VerifyWithFallback(%q) = %v, %v; want true", v.sig, ok, err)
			}
			w := newWebhooks(t, webhooks.Options{Secret: v.secret})
			got, err = w.Sign([]byte(v.payload))
			if err != nil || got != v.sig {
				t.Errorf("Webhooks.Sign(%q) = %q, %v; want %q", v.payload, got, err, v.sig)
			}
			ok, err = w.Verify([]byte(v.payload), v.sig)
			if err != nil || !ok {
				t.Errorf("Webhooks.Verify(%q) = %v, %v; want true", v.sig, ok, err)
			}
		})
	}
}

func TestSignVerifyReexportErrors(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"Sign empty secret", second(webhooks.Sign("", []byte("x"))), webhooks.ErrMissingSecret},
		{"Sign nil payload", second(webhooks.Sign("s", nil)), webhooks.ErrMissingPayload},
		{"Verify nil payload", second(webhooks.Verify("s", nil, "sha256=00")), webhooks.ErrMissingPayload},
		{"Verify empty signature", second(webhooks.Verify("s", []byte("x"), "")), webhooks.ErrMissingSignature},
		{"same sentinel as signature package", second(webhooks.Sign("", []byte("x"))), signature.ErrMissingSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.want) {
				t.Errorf("error = %v, want %v", tt.err, tt.want)
			}
		})
	}
	// Webhooks.Verify ignores the additional secrets, like octokit's.
	w := newWebhooks(t, webhooks.Options{Secret: "new", AdditionalSecrets: []string{"secret"}})
	ok, err := w.Verify([]byte("data"), "sha256=1b2c16b75bd2a870c114153ccda5bcfca63314bc722fa160d690de133ccbb9db")
	if ok || err != nil {
		t.Errorf("Webhooks.Verify with an additional secret's signature = %v, %v; want false, nil", ok, err)
	}
}

func second[T any](_ T, err error) error { return err }

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		opts    webhooks.Options
		want    error
		wantMsg string
	}{
		{"ok", webhooks.Options{Secret: "s"}, nil, ""},
		{"empty secret", webhooks.Options{}, webhooks.ErrMissingSecret, "webhooks: Options.Secret: webhooks: secret required"},
		{"empty additional secret", webhooks.Options{Secret: "s", AdditionalSecrets: []string{"a", ""}}, webhooks.ErrMissingSecret,
			"webhooks: Options.AdditionalSecrets[1]: webhooks: secret required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := webhooks.New(tt.opts)
			if !errors.Is(err, tt.want) {
				t.Fatalf("New() error = %v, want %v", err, tt.want)
			}
			if tt.want != nil && (w != nil || err.Error() != tt.wantMsg) {
				t.Errorf("New() = %v, %q; want nil, %q", w, err, tt.wantMsg)
			}
		})
	}
}

func TestNewCopiesAdditionalSecrets(t *testing.T) {
	secrets := []string{"secret"}
	w := newWebhooks(t, webhooks.Options{Secret: "new", AdditionalSecrets: secrets})
	secrets[0] = "changed"
	err := w.VerifyAndReceive(t.Context(), "1", "push", []byte("data"), "sha256=1b2c16b75bd2a870c114153ccda5bcfca63314bc722fa160d690de133ccbb9db")
	// "data" is not JSON, so a verified delivery fails with ErrInvalidPayload.
	if !errors.Is(err, webhooks.ErrInvalidPayload) {
		t.Errorf("VerifyAndReceive() = %v, want ErrInvalidPayload (signature accepted)", err)
	}
}

func TestVerifyAndReceive(t *testing.T) {
	const (
		payload = `{"foo":"bar"}`
		good    = "sha256=4864d2759938a15468b5df9ade20bf161da9b4f737ea61794142f3484236bda3" // mysecret
	)
	tests := []struct {
		name         string
		secret       string
		additional   []string
		event        string
		payload      []byte
		sig          string
		wantIs       []error
		wantMsg      string
		wantStatus   int
		wantHandlers int32
		wantErrCalls int32
	}{
		{name: "valid", secret: "mysecret", event: "push", payload: []byte(payload), sig: good, wantHandlers: 1},
		{name: "valid via additional secret", secret: "rotated", additional: []string{"x", "mysecret"}, event: "push", payload: []byte(payload), sig: good, wantHandlers: 1},
		{name: "wrong secret", secret: "other", event: "push", payload: []byte(payload), sig: good,
			wantIs: []error{webhooks.ErrInvalidSignature}, wantMsg: "signature does not match event payload and secret", wantStatus: 400, wantErrCalls: 1},
		{name: "uppercase signature", secret: "mysecret", event: "push", payload: []byte(payload),
			sig:    "sha256=4864D2759938A15468B5DF9ADE20BF161DA9B4F737EA61794142F3484236BDA3",
			wantIs: []error{webhooks.ErrInvalidSignature}, wantMsg: "signature does not match event payload and secret", wantStatus: 400, wantErrCalls: 1},
		{name: "tampered payload", secret: "mysecret", event: "push", payload: []byte(`{"foo":"baz"}`), sig: good,
			wantIs: []error{webhooks.ErrInvalidSignature}, wantMsg: "signature does not match event payload and secret", wantStatus: 400, wantErrCalls: 1},
		{name: "missing signature", secret: "mysecret", event: "push", payload: []byte(payload), sig: "",
			wantIs:  []error{webhooks.ErrInvalidSignature, webhooks.ErrMissingSignature},
			wantMsg: "signature does not match event payload and secret", wantStatus: 400, wantErrCalls: 1},
		{name: "nil payload", secret: "mysecret", event: "push", payload: nil, sig: good,
			wantIs:  []error{webhooks.ErrInvalidSignature, webhooks.ErrMissingPayload},
			wantMsg: "signature does not match event payload and secret", wantStatus: 400, wantErrCalls: 1},
		{name: "empty payload signed", secret: "secret", event: "push", payload: []byte{},
			sig:     "sha256=f9e66e179b6747ae54108f82f8ade8b3c25d76fd30afde6c395822c530196169",
			wantIs:  []error{webhooks.ErrInvalidSignature, webhooks.ErrMissingPayload},
			wantMsg: "signature does not match event payload and secret", wantStatus: 400, wantErrCalls: 1},
		{name: "signed but not JSON", secret: "secret", event: "push", payload: []byte("data"),
			sig:    "sha256=1b2c16b75bd2a870c114153ccda5bcfca63314bc722fa160d690de133ccbb9db",
			wantIs: []error{webhooks.ErrInvalidPayload}, wantMsg: "webhooks: payload is not a JSON object: invalid character 'd' looking for beginning of value", wantStatus: 400},
		// Signatures from `printf %s PAYLOAD | openssl dgst -sha256 -hmac mysecret`.
		{name: "signed JSON but not an object", secret: "mysecret", event: "push", payload: []byte(`true`),
			sig:    "sha256=425ddc479565b65bfe050390b6808af9fd334646bc9e875a64973290e859ddaf",
			wantIs: []error{webhooks.ErrInvalidPayload}, wantMsg: "webhooks: payload is not a JSON object: got a boolean", wantStatus: 400},
		{name: "signed array", secret: "mysecret", event: "push", payload: []byte(`[1]`),
			sig:    "sha256=1ae1ab677c338e2c3cdc3b5db53eba489b486c735880d5152f7f91240602895f",
			wantIs: []error{webhooks.ErrInvalidPayload}, wantMsg: "webhooks: payload is not a JSON object: got an array", wantStatus: 400},
		{name: "action event", secret: "mysecret", event: "issues", payload: []byte(`{"action":"opened","issue":{"number":1}}`),
			sig: "sha256=34b5d3f6b71e223779b168c469f5ee7e01145404575a01611a6cc802b841734a", wantHandlers: 1},
		{name: "missing name", secret: "mysecret", event: "", payload: []byte(payload), sig: good,
			wantIs: []error{webhooks.ErrMissingName}, wantMsg: "webhooks: event name required", wantStatus: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newWebhooks(t, webhooks.Options{Secret: tt.secret, AdditionalSecrets: tt.additional})
				var handlers, errCalls atomic.Int32
				errSeen := make(chan *webhooks.AggregateError, 1)
				w.OnAny(func(ctx context.Context, e webhooks.Event) error {
					handlers.Add(1)
					if e.ID != "d-42" || e.Name != tt.event || string(e.Payload) != string(tt.payload) {
						t.Errorf("handler got %+v", e)
					}
					return nil
				})
				w.OnError(func(ctx context.Context, err *webhooks.AggregateError) { errCalls.Add(1); errSeen <- err })
				err := w.VerifyAndReceive(t.Context(), "d-42", tt.event, tt.payload, tt.sig)
				if tt.wantMsg == "" {
					if err != nil {
						t.Fatalf("VerifyAndReceive() error = %v, want nil", err)
					}
				} else if err == nil || err.Error() != tt.wantMsg {
					t.Fatalf("VerifyAndReceive() error = %v, want %q", err, tt.wantMsg)
				}
				for _, target := range tt.wantIs {
					if !errors.Is(err, target) {
						t.Errorf("errors.Is(%v, %v) = false", err, target)
					}
				}
				if tt.wantStatus != 0 {
					sc, ok := errors.AsType[interface {
						error
						StatusCode() int
					}](err)
					if !ok || sc.StatusCode() != tt.wantStatus {
						t.Errorf("VerifyAndReceive() error status: %v, want %d", sc, tt.wantStatus)
					}
				}
				if n := handlers.Load(); n != tt.wantHandlers {
					t.Errorf("%d handler calls, want %d", n, tt.wantHandlers)
				}
				if tt.wantErrCalls > 0 {
					select {
					case agg := <-errSeen:
						if agg.Event.ID != "d-42" || agg.Event.Name != tt.event || string(agg.Event.Payload) != string(tt.payload) {
							t.Errorf("error handler event = %+v", agg.Event)
						}
					case <-time.After(5 * time.Second):
						t.Fatal("error handler not called")
					}
				} else {
					synctest.Wait() // an error handler would be running or done
					if n := errCalls.Load(); n != 0 {
						t.Errorf("%d error handler calls, want 0", n)
					}
				}
			})
		})
	}
}

func TestVerifyAndReceiveHandlerError(t *testing.T) {
	w := newWebhooks(t, webhooks.Options{Secret: "mysecret"})
	w.OnError(func(context.Context, *webhooks.AggregateError) {})
	mustOn(t, w, "push", failWith(&statusError{msg: "nope", status: 422}))
	err := w.VerifyAndReceive(t.Context(), "1", "push", []byte(`{"foo":"bar"}`), "sha256=4864d2759938a15468b5df9ade20bf161da9b4f737ea61794142f3484236bda3")
	agg, ok := errors.AsType[*webhooks.AggregateError](err)
	if !ok || agg.StatusCode() != 422 || err.Error() != "nope" {
		t.Errorf("VerifyAndReceive() = %v; want *AggregateError nope with status 422", err)
	}
	if want := json.RawMessage(`{"foo":"bar"}`); string(agg.Event.Payload) != string(want) || agg.Event.Name != "push" {
		t.Errorf("AggregateError.Event = %+v", agg.Event)
	}
}
