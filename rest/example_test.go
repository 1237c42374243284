package rest_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"time"

	"github.com/hookline/hookline/rest"
)

// A POST with a token, query parameters (merged with the query already in
// the URL) and a JSON body. The local server echoes what it received.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "%s %s?%s\nContent-Type: %s\n%s",
			r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), body)
	}))
	defer srv.Close()

	resp, err := rest.Send(rest.Request{
		Method:      rest.Post,
		BaseURL:     srv.URL + "/v3/items?page=2",
		Headers:     map[string]string{"Authorization": "Bearer " + os.Getenv("API_KEY")},
		QueryParams: map[string]string{"q": "a b&c"},
		Body:        []byte(`{"name":"hookline"}`),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.StatusCode)
	fmt.Println(resp.Body)
	// Output:
	// 201
	// POST /v3/items?page=2&q=a+b%26c
	// Content-Type: application/json
	// {"name":"hookline"}
}

// A client that retries: the server is unavailable once, then answers.
func ExampleClient_retry() {
	var calls int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if atomic.AddInt32(&calls, 1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready")
	}))
	defer srv.Close()

	client := &rest.Client{
		HTTPClient: &http.Client{Timeout: 10 * time.Second},
		Retry:      &rest.RetryPolicy{MaxAttempts: 3, BaseDelay: 10 * time.Millisecond},
	}
	resp, err := client.Send(rest.Request{Method: rest.Get, BaseURL: srv.URL + "/status"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.StatusCode, resp.Body, "after", atomic.LoadInt32(&calls), "attempts")
	// Output:
	// 200 ready after 2 attempts
}

// A non-2xx status is data; turn it into an error where that suits the
// caller.
func ExampleRestError() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"errors":[{"message":"no such item"}]}`)
	}))
	defer srv.Close()

	resp, err := rest.Send(rest.Request{Method: rest.Get, BaseURL: srv.URL + "/v3/items/42"})
	if err != nil {
		fmt.Println(err)
		return
	}
	if resp.StatusCode >= 400 {
		err = &rest.RestError{Response: resp}
	}
	fmt.Println(err)

	var missing *rest.RestError
	fmt.Println(missing.Error())
	// Output:
	// {"errors":[{"message":"no such item"}]}
	// rest: nil RestError
}

// Bad input is reported before anything is sent.
func ExampleSend_invalidURL() {
	_, err := rest.Send(rest.Request{Method: rest.Get, BaseURL: "localhost:3000"})
	fmt.Println(err)
	fmt.Println(errors.Is(err, rest.ErrInvalidURL))
	// Output:
	// rest: BaseURL "localhost:3000" has no scheme; did you mean http://localhost:3000?
	// true
}

func ExampleAddQueryParameters() {
	fmt.Println(rest.AddQueryParameters("https://api.example.com/v3/items?page=2#top", map[string]string{"q": "a b/é"}))
	// Output:
	// https://api.example.com/v3/items?page=2&q=a+b%2F%C3%A9#top
}
