// Package rest sends one HTTP request to a REST-style API and returns the
// status code, body and headers of the reply.
//
// It is a compatible, corrected version of the classic
// github.com/sendgrid/rest package: code written for that package compiles
// and works with only its import path changed (one exception below).
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
// # Differences from the classic package
//
//   - QueryParams are merged into a query already present in BaseURL (the
//     classic package appended a second "?"), and an entry replaces the
//     parameters of the same name in BaseURL. AddQueryParameters does the same.
//   - Content-Type: application/json is set only when Body is not empty and
//     Headers has no Content-Type in any letter case; a caller's Content-Type
//     is never replaced.
//   - A "Host" entry in Headers sets the request's Host (net/http ignores a
//     Host header).
//   - Bad input (a method that is not an HTTP token, a BaseURL that is empty,
//     unparsable, without scheme or host, or not http/https, a header name or
//     value that cannot be sent) is an error wrapping ErrInvalidMethod,
//     ErrInvalidURL or ErrInvalidHeader, with a message saying what to do, and
//     nothing is sent.
//   - DefaultClient and the zero Client have a DefaultTimeout (30 s) per
//     attempt; the classic DefaultClient never timed out.
//   - Response bodies are limited to Client.MaxResponseBytes
//     (DefaultMaxResponseBytes, 32 MiB, if zero); a larger one is an error
//     wrapping ErrResponseTooLarge. BuildResponse uses DefaultClient's limit.
//   - Client.Retry enables retries with exponential backoff, full jitter and
//     Retry-After (see RetryPolicy).
//   - A HEAD response body is never read, and 307/308 redirects resend the
//     body.
//   - RestError.Error never panics (nil receiver, nil Response, empty body).
//   - A transport error is returned as net/http returns it, a *url.Error,
//     so err.(*url.Error), err.(net.Error) and os.IsTimeout(err) answer as
//     with the classic package; after retries, the error (saying "gave up
//     after N attempts") answers them as the last attempt's did and unwraps
//     to it. Errors this package makes start with "rest: ". On error the
//     returned *Response is nil; BuildResponse no longer returns a partial
//     Response with its error.
//   - A nil context is treated as context.Background(), a nil *Client as the
//     zero Client, a nil *http.Request or *http.Response as an error, where
//     the classic package panicked.
//   - Head and Options are added to the Method constants.
//   - The exception: Client has more fields, so the unkeyed literal
//     rest.Client{hc} no longer compiles; write rest.Client{HTTPClient: hc}.
//
// # Decisions where the specification is silent
//
//   - An empty Method is GET, as in net/http and the classic package. Any
//     HTTP token is accepted as a method and sent as written (not
//     upper-cased).
//   - Only http and https URLs are accepted by Send; MakeRequest sends any
//     *http.Request the HTTPClient accepts. For a BaseURL without a scheme the
//     error suggests http:// for localhost and loopback addresses and
//     https:// otherwise.
//   - QueryParams are appended in name order after the BaseURL parameters,
//     which keep their original order and encoding; values are escaped with
//     url.QueryEscape (a space is "+").
//   - When two Headers names differ only in case, the one sorting last wins,
//     so the result does not depend on map order. Header values are never
//     quoted in error messages, since they often hold credentials; the URL
//     query is left out of messages this package writes for the same reason.
//   - The retry policy retries every method, POST included, because it is
//     opt-in; network errors exclude certificate errors, cancellation and
//     ErrResponseTooLarge. A Retry-After longer than MaxRetryAfter is cut to
//     MaxRetryAfter rather than ending the retries. When the next wait would
//     end after the context's deadline, the last response (or error) is
//     returned at once instead of a deadline error.
//   - Retried and given-up attempts are reported in the error text ("gave up
//     after 3 attempts"); after the last attempt a retryable status is
//     returned as a normal Response.
//   - RestError is kept for callers; this package never returns it.
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
