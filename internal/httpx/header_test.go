package httpx

import (
	"net/http"
	"reflect"
	"testing"
)

func TestIsTokenList(t *testing.T) {
	for in, want := range map[string]bool{"content-type, x-a": true, "a,,b": true, "a b": false, "a;b": false} {
		if got := IsTokenList(in); got != want {
			t.Errorf("IsTokenList(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestForwardable(t *testing.T) {
	h := http.Header{
		"Content-Type":      {"application/json"},
		"X-Custom":          {"one", "two"},
		"Connection":        {"keep-alive, X-Hop"},
		"X-Hop":             {"per-connection"},
		"Keep-Alive":        {"timeout=5"},
		"Transfer-Encoding": {"chunked"},
		"Content-Length":    {"999"},
		"Host":              {"relay.example"},
		"Upgrade":           {"h2c"},
	}
	got := Forwardable(h)
	want := http.Header{"Content-Type": {"application/json"}, "X-Custom": {"one", "two"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Forwardable = %v, want %v", got, want)
	}
	if h.Get("X-Hop") == "" {
		t.Error("Forwardable changed its argument")
	}
	if Forwardable(nil) == nil {
		t.Error("Forwardable(nil) is nil")
	}
}

func TestIsHopByHop(t *testing.T) {
	for name, want := range map[string]bool{"Connection": true, "transfer-encoding": true, "EXPECT": true, "Host": false, "X-GitHub-Event": false, "Content-Type": false} {
		if got := IsHopByHop(name); got != want {
			t.Errorf("IsHopByHop(%q) = %v, want %v", name, got, want)
		}
	}
}
