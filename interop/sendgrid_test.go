package interop

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"testing"
	"time"

	sendgrid "github.com/sendgrid/rest"

	"github.com/hookline/hookline/rest"
)

// outcome is what a program written for sendgrid/rest sees of one call:
// the answer, and the branches its error handling would take.
type outcome struct {
	Status                          int
	Body                            string
	Err, URLError, NetError         bool
	Timeout, AsURLError, URLTimeout bool
}

func outcomeOf(status int, body string, err error) outcome {
	o := outcome{Status: status, Body: body, Err: err != nil}
	if err != nil {
		_, o.URLError = err.(*url.Error)
		_, o.NetError = err.(net.Error)
		o.Timeout = os.IsTimeout(err)
		var ue *url.Error
		o.AsURLError = errors.As(err, &ue)
		o.URLTimeout = o.AsURLError && ue.Timeout()
	}
	return o
}

// The migration promise, as a test: the same program, once against
// sendgrid/rest v2.6.9 and once against rest, sees the same answers and
// takes the same error branches, for a timeout, a refused connection, a
// 404, a 500 and a redirect. With a retry policy (rest only), the error
// after the last attempt still takes the timeout branches.
func TestSendgridMigration(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no such thing", http.StatusNotFound) })
	mux.HandleFunc("/broken", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "oops", http.StatusInternalServerError) })
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/here", http.StatusFound) })
	mux.HandleFunc("/here", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "here") })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()

	const timeout = 100 * time.Millisecond // the client's own deadline: real sockets
	viaSendgrid := func(base string) outcome {
		c := &sendgrid.Client{HTTPClient: &http.Client{Timeout: timeout}}
		resp, err := c.Send(sendgrid.Request{Method: sendgrid.Get, BaseURL: base})
		if err != nil {
			return outcomeOf(0, "", err)
		}
		return outcomeOf(resp.StatusCode, resp.Body, nil)
	}
	viaRest := func(c *rest.Client) func(string) outcome {
		return func(base string) outcome {
			resp, err := c.Send(rest.Request{Method: rest.Get, BaseURL: base})
			if err != nil {
				return outcomeOf(0, "", err)
			}
			return outcomeOf(resp.StatusCode, resp.Body, nil)
		}
	}
	plain := viaRest(&rest.Client{HTTPClient: &http.Client{Timeout: timeout}})
	retrying := viaRest(&rest.Client{HTTPClient: &http.Client{Timeout: timeout}, Retry: &rest.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond}})
	for _, tc := range []struct{ name, url string }{
		{"timeout", srv.URL + "/slow"},
		{"refused", refused},
		{"404", srv.URL + "/missing"},
		{"500", srv.URL + "/broken"},
		{"redirect", srv.URL + "/moved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := viaSendgrid(tc.url)
			if got := plain(tc.url); got != want {
				t.Errorf("rest:     %+v\nsendgrid: %+v", got, want)
			}
			if tc.name == "timeout" || tc.name == "refused" {
				got := retrying(tc.url)
				if got.AsURLError != want.AsURLError || got.NetError != want.NetError || got.Timeout != want.Timeout || got.URLTimeout != want.URLTimeout {
					t.Errorf("rest with retries: %+v\nsendgrid:          %+v", got, want)
				}
			}
			t.Logf("%+v", want)
		})
	}
}
