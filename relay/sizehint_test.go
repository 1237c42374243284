package relay_test

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/hookline/hookline/relay"
)

// TestSizeHint checks the comment that precedes large events: it names an
// upper bound of the event's data lines, comes before the id (so clients
// that size a buffer with it have it before the data), and small events go
// without it. SSE clients ignore comments, so every other test reads the
// same events with or without it.
func TestSizeHint(t *testing.T) {
	_, ts := newRelay(t, relay.Options{})
	req, err := http.NewRequest(http.MethodGet, ts.URL+"/hint", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(relay.StreamHeader, "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	readLine := func() string {
		t.Helper()
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		return line
	}
	for readLine() != "\n" { // the ready event
	}
	big := `{"pad":"` + strings.Repeat("x", 100<<10) + `"}`
	mustPost(t, ts.URL+"/hint", `{"small":true}`, "Content-Type", "application/json")
	mustPost(t, ts.URL+"/hint", big, "Content-Type", "application/json")

	if line := readLine(); line != "id: 1\n" {
		t.Errorf("a small event starts with %q, want its id (no size hint)", line)
	}
	for readLine() != "\n" {
	}
	hint := readLine()
	n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(hint, ": "+relay.SizeHint+" "), "\n"))
	if err != nil {
		t.Fatalf("a large event starts with %q, want %q", hint, ": "+relay.SizeHint+" N\n")
	}
	if line := readLine(); line != "id: 2\n" {
		t.Fatalf("after the size hint: %q, want the id", line)
	}
	data := 0
	for {
		line := readLine()
		if line == "\n" {
			break
		}
		data += len(strings.TrimPrefix(line, "data: ")) - 1
	}
	if data < len(big) || data > n {
		t.Errorf("the event's data takes %d bytes, the hint says %d; want a bound at least the %d-byte body", data, n, len(big))
	}
}
