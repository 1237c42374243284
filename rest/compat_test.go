package rest_test

// This file holds code written against the classic github.com/sendgrid/rest
// API (its README and tests) with only the import path changed, to prove
// that such code compiles and works unchanged.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/rest"
)

// Every exported name of the classic package, with its signature.
var (
	_ rest.Method = rest.Get
	_ rest.Method = rest.Post
	_ rest.Method = rest.Put
	_ rest.Method = rest.Patch
	_ rest.Method = rest.Delete
	_ string      = rest.Version

	_ = rest.Request{Method: rest.Get, BaseURL: "", Headers: map[string]string{}, QueryParams: map[string]string{}, Body: []byte{}}
	_ = rest.Response{StatusCode: 0, Body: "", Headers: map[string][]string{}}
	_ = rest.Client{HTTPClient: &http.Client{}}
	_ = rest.RestError{Response: &rest.Response{}}

	_ error        = &rest.RestError{}
	_ *rest.Client = rest.DefaultClient

	_ func(string, map[string]string) string                                    = rest.AddQueryParameters
	_ func(rest.Request) (*http.Request, error)                                 = rest.BuildRequestObject
	_ func(*http.Request) (*http.Response, error)                               = rest.MakeRequest
	_ func(*http.Response) (*rest.Response, error)                              = rest.BuildResponse
	_ func(rest.Request) (*rest.Response, error)                                = rest.API
	_ func(rest.Request) (*rest.Response, error)                                = rest.Send
	_ func(context.Context, rest.Request) (*rest.Response, error)               = rest.SendWithContext
	_ func(*rest.Client, *http.Request) (*http.Response, error)                 = (*rest.Client).MakeRequest
	_ func(*rest.Client, rest.Request) (*rest.Response, error)                  = (*rest.Client).API
	_ func(*rest.Client, rest.Request) (*rest.Response, error)                  = (*rest.Client).Send
	_ func(*rest.Client, context.Context, rest.Request) (*rest.Response, error) = (*rest.Client).SendWithContext
)

// readmeServer answers like an API would and describes what it received,
// without echoing the secret.
func readmeServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		summary := map[string]interface{}{
			"method":       r.Method,
			"path":         r.URL.Path,
			"query":        r.URL.RawQuery,
			"bearer":       strings.HasPrefix(r.Header.Get("Authorization"), "Bearer"),
			"x_test":       r.Header.Get("X-Test"),
			"content_type": r.Header.Get("Content-Type"),
			"body":         string(body),
		}
		out, _ := json.Marshal(summary)
		w.Header()["Date"] = nil // deterministic headers
		w.Header().Set("Content-Type", "application/json")
		w.Write(out)
	}))
}

// readmeGet is the classic README's GET example; only host differs.
func readmeGet(host string) {
	param := "myparam"
	endpoint := "/your/api/" + param + "/call"
	baseURL := host + endpoint
	method := rest.Get
	request := rest.Request{
		Method:  method,
		BaseURL: baseURL,
	}
	response, err := rest.API(request)
	if err != nil {
		fmt.Println(err)
	} else {
		fmt.Println(response.StatusCode)
		fmt.Println(response.Body)
		fmt.Println(response.Headers)
	}
}

// readmePost is the classic README's POST example; only host differs.
func readmePost(host string) {
	param := "myparam"
	endpoint := "/your/api/" + param + "/call"
	baseURL := host + endpoint
	Headers := make(map[string]string)
	key := os.Getenv("API_KEY")
	Headers["Authorization"] = "Bearer " + key
	Headers["X-Test"] = "Test"
	var Body = []byte(`{"some": 0, "awesome": 1, "data": 3}`)
	queryParams := make(map[string]string)
	queryParams["hello"] = "0"
	queryParams["world"] = "1"
	method := rest.Post
	request := rest.Request{
		Method:      method,
		BaseURL:     baseURL,
		Headers:     Headers,
		QueryParams: queryParams,
		Body:        Body,
	}
	response, err := rest.Send(request)
	if err != nil {
		fmt.Println(err)
	} else {
		fmt.Println(response.StatusCode)
		fmt.Println(response.Body)
		fmt.Println(response.Headers)
	}
}

func Example_readmeGet() {
	srv := readmeServer()
	defer srv.Close()
	readmeGet(srv.URL)
	// Output:
	// 200
	// {"bearer":false,"body":"","content_type":"","method":"GET","path":"/your/api/myparam/call","query":"","x_test":""}
	// map[Content-Length:[114] Content-Type:[application/json]]
}

func Example_readmePost() {
	srv := readmeServer()
	defer srv.Close()
	readmePost(srv.URL)
	// Output:
	// 200
	// {"bearer":true,"body":"{\"some\": 0, \"awesome\": 1, \"data\": 3}","content_type":"application/json","method":"POST","path":"/your/api/myparam/call","query":"hello=0\u0026world=1","x_test":"Test"}
	// map[Content-Length:[196] Content-Type:[application/json]]
}

func TestReadmePostSendsTheKey(t *testing.T) {
	t.Setenv("API_KEY", "SG.test-key")
	srv, rec := startServer(t, func(w http.ResponseWriter, r *http.Request) {})
	readmePost(srv.URL)
	got := only(t, rec)
	if auth := got.Header.Get("Authorization"); auth != "Bearer SG.test-key" {
		t.Errorf("README POST: server saw Authorization %q, want %q", auth, "Bearer SG.test-key")
	}
}

// The classic package's own tests, adapted to black-box form.

func TestClassicBuildBadRequest(t *testing.T) {
	t.Parallel()
	req, err := rest.BuildRequestObject(rest.Request{Method: rest.Method("@")})
	if err == nil || req != nil {
		t.Errorf("BuildRequestObject(Method %q) = %v, %v; want nil, an error", "@", req, err)
	}
	res, err := rest.API(rest.Request{Method: rest.Method("@")})
	if err == nil || res != nil {
		t.Errorf("API(Method %q) = %v, %v; want nil, an error", "@", res, err)
	}
}

func TestClassicContentType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		headers map[string]string
		want    string
	}{
		{"default with body", nil, "application/json"},
		{"custom", map[string]string{"Content-Type": "custom"}, "custom"},
	}
	for _, tc := range tests {
		tc := tc // a copy per iteration: the module is Go 1.14
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, err := rest.BuildRequestObject(rest.Request{Method: rest.Get, BaseURL: "http://localhost", Headers: tc.headers, Body: []byte("Hello World")})
			if err != nil {
				t.Fatal(err)
			}
			if got := req.Header.Get("Content-Type"); got != tc.want {
				t.Errorf("BuildRequestObject(headers %v) Content-Type = %q, want %q", tc.headers, got, tc.want)
			}
		})
	}
}

func TestClassicBuildResponse(t *testing.T) {
	t.Parallel()
	srv, _ := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "{\"message\": \"success\"}")
	})
	req, err := rest.BuildRequestObject(rest.Request{Method: rest.Get, BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	res, err := rest.MakeRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	response, err := rest.BuildResponse(res)
	if err != nil || response.StatusCode != 200 || response.Body != "{\"message\": \"success\"}\n" || len(response.Headers) == 0 {
		t.Errorf("BuildResponse() = %+v, %v; want 200 with the body and headers", response, err)
	}
}

func TestClassicCustomHTTPClient(t *testing.T) {
	t.Parallel()
	srv, _ := startServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	customClient := &rest.Client{HTTPClient: &http.Client{Timeout: time.Millisecond * 10}}
	_, err := customClient.Send(rest.Request{Method: rest.Get, BaseURL: srv.URL + "/test_endpoint"})
	if err == nil || !strings.Contains(err.Error(), "Client.Timeout exceeded while awaiting headers") {
		t.Errorf("Send() with a 10ms client timeout error = %v, want a Client.Timeout error", err)
	}
}

func TestClassicSendWithContext(t *testing.T) {
	t.Parallel()
	srv, _ := startServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond*10)
	defer cancel()
	_, err := rest.SendWithContext(ctx, rest.Request{Method: rest.Get, BaseURL: srv.URL + "/test_endpoint"})
	if err == nil || !strings.Contains(err.Error(), "context deadline exceeded") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("SendWithContext() past the deadline error = %v, want context deadline exceeded", err)
	}
}
