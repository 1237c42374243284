package relay_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/hookline/hookline/relay"
)

// A relay on a test server: a subscriber reads a channel as smee-client
// does, a webhook sender POSTs to it.
func Example() {
	srv, err := relay.New(relay.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Close() // ends the stream, so that ts can close

	channel := ts.URL + "/" + srv.NewChannel()

	req, _ := http.NewRequest(http.MethodGet, channel, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	stream := bufio.NewReader(resp.Body)
	readEvent := func() map[string]string {
		ev := map[string]string{}
		for {
			line, err := stream.ReadString('\n')
			if err != nil || line == "\n" {
				return ev
			}
			field, value, _ := strings.Cut(strings.TrimSuffix(line, "\n"), ": ")
			ev[field] = value
		}
	}
	fmt.Println("event:", readEvent()["event"])

	post, _ := http.NewRequest(http.MethodPost, channel, strings.NewReader(`{"zen":"Design for failure."}`))
	post.Header.Set("Content-Type", "application/json")
	post.Header.Set("X-GitHub-Event", "ping")
	answer, err := http.DefaultClient.Do(post)
	if err != nil {
		fmt.Println(err)
		return
	}
	answer.Body.Close()

	ev := readEvent()
	var msg struct {
		Event string          `json:"x-github-event"`
		Body  json.RawMessage `json:"body"`
	}
	json.Unmarshal([]byte(ev["data"]), &msg)
	fmt.Println("id:", ev["id"])
	fmt.Println("x-github-event:", msg.Event)
	fmt.Println("body:", string(msg.Body))
	// Output:
	// event: ready
	// id: 1
	// x-github-event: ping
	// body: {"zen":"Design for failure."}
}
