package rest_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hookline/hookline/rest"
)

// The benchmarks send the same request (POST, two headers, two query
// parameters, a small JSON body; a small JSON reply) to a local server, once
// through Send and once with bare net/http, to measure the package's
// overhead. Run: go test -run '^$' -bench . -count 6 ./rest/

var (
	benchBody  = []byte(`{"some": 0, "awesome": 1, "data": 3}`)
	benchReply = []byte(`{"message": "success", "id": 12345}`)
)

func benchServer(b *testing.B) *httptest.Server {
	b.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(benchReply)
	}))
	b.Cleanup(srv.Close)
	return srv
}

func BenchmarkSend(b *testing.B) {
	srv := benchServer(b)
	client := &rest.Client{HTTPClient: &http.Client{Transport: &http.Transport{}}}
	b.Cleanup(client.HTTPClient.CloseIdleConnections)
	req := rest.Request{
		Method:      rest.Post,
		BaseURL:     srv.URL + "/your/api/myparam/call",
		Headers:     map[string]string{"Authorization": "Bearer key", "X-Test": "Test"},
		QueryParams: map[string]string{"hello": "0", "world": "1"},
		Body:        benchBody,
	}
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.SendWithContext(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.StatusCode != 200 || len(resp.Body) != len(benchReply) {
			b.Fatalf("Send() = %d %q", resp.StatusCode, resp.Body)
		}
	}
}

func BenchmarkBareHTTP(b *testing.B) {
	srv := benchServer(b)
	client := &http.Client{Transport: &http.Transport{}}
	b.Cleanup(client.CloseIdleConnections)
	url := srv.URL + "/your/api/myparam/call?hello=0&world=1"
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(benchBody))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer key")
		req.Header.Set("X-Test", "Test")
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			b.Fatal(err)
		}
		if s := string(body); res.StatusCode != 200 || len(s) != len(benchReply) {
			b.Fatalf("Do() = %d %q", res.StatusCode, s)
		}
	}
}
