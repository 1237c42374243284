// Package rest sends one HTTP request to a REST-style API and returns the
// status code, body and headers of the reply.
//
// It is a compatible, corrected version of the classic
// github.com/sendgrid/rest package: code written for that package compiles
// and works with only its import path changed (the one exception: write
// rest.Client{HTTPClient: hc}, not the unkeyed rest.Client{hc}).
//
//	resp, err := rest.Send(rest.Request{
//		Method:      rest.Post,
//		BaseURL:     "https://api.example.com/v3/items",
//		Headers:     map[string]string{"Authorization": "Bearer " + os.Getenv("API_KEY")},
//		QueryParams: map[string]string{"dry_run": "true"},
//		Body:        []byte(`{"name":"hookline"}`),
//	})
//	if err != nil {
//		return err // nothing usable came back
//	}
//	if resp.StatusCode >= 400 {
//		return &rest.RestError{Response: resp} // non-2xx is data, not an error
//	}
//	fmt.Println(resp.StatusCode, resp.Body, resp.Headers)
//
// A non-2xx status is a Response, not an error: an error means nothing
// usable came back. Client.Retry retries with exponential backoff, full
// jitter and Retry-After (see RetryPolicy); a Client bounds each attempt
// (30 s) and each response body (32 MiB). Bad input (a method that is not
// an HTTP token, a URL without scheme or host, a header that cannot be
// sent) is an error saying what to do, and nothing is sent.
//
// What differs from the classic package, and the decisions taken where it
// is silent, are listed in docs/REST.md.
//
// # Go versions
//
// The package is its own module, github.com/hookline/hookline/rest, whose
// go.mod says go 1.14 and requires nothing: a module that still builds with
// Go 1.14–1.17 can require it without its go line or its requirements
// changing. It imports only the standard library and uses no standard
// library API newer than Go 1.14 (rest/internal/apicheck checks it against the Go
// API lists every Go installation carries). Its tests need a current Go.
package rest
