package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/hookline/hookline/webhooks"
)

// floorEnv, when set, makes this program act as the floor tool's relay
// ("serve") or forwarder ("forward") instead of hookline: the least a relay
// hop can do, written with nothing but net/http, to measure what one more
// hop costs on this machine, in the same run as everything else. The relay
// writes each POSTed body to the one subscribed stream, as one event
// ("id: <delivery id>", "data: <body>"), from the POST's own goroutine, and
// answers 200 once it is flushed; the forwarder reads the stream line by
// line and POSTs each event's body to the target, one at a time, on one
// goroutine, with one processor (GOMAXPROCS 1, as hookline forward runs in
// order: with two, this forwarder spent 1.2 ms of CPU a delivery at 20/s
// against 0.65 with one, and added 0.2 ms more). No history, no
// verification, no trace, no state: what is left is a second loopback POST
// and one stream write and read, in two more processes, which is the floor
// for hookline's added latency and for its CPU per delivery. JSON bodies
// only (an event's data is one line).
const floorEnv = "HOOKLINE_BENCH_FLOOR"

const floorChannel = "/floor"

func runFloor(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "floor: serve or forward")
		return 2
	}
	fs := flag.NewFlagSet("floor "+args[0], flag.ContinueOnError)
	fs.Bool("no-color", false, "ignored")
	addr := fs.String("addr", "127.0.0.1:0", "serve: where to listen")
	url := fs.String("url", "", "forward: the stream")
	target := fs.String("target", "", "forward: where to POST")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = floorServe(ctx, *addr)
	case "forward":
		err = floorForward(ctx, *url, *target)
	default:
		err = fmt.Errorf("unknown command %q", args[0])
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		return 1
	}
	return 0
}

// floorRelay is the floor's relay: one channel, one subscriber at a time.
type floorRelay struct {
	mu  sync.Mutex
	sub http.ResponseWriter // nil while nobody reads
}

func floorServe(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	base := "http://" + ln.Addr().String()
	// The lines startRelay reads from hookline serve.
	fmt.Printf("hookline relay listening on %s\nnew channel: %s%s\n", base, base, floorChannel)
	r := &floorRelay{}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (r *floorRelay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch {
	case req.URL.Path == "/healthz":
		n := 0
		r.mu.Lock()
		if r.sub != nil {
			n = 1
		}
		r.mu.Unlock()
		fmt.Fprintf(w, `{"subscribers":%d}`, n)
	case req.URL.Path != floorChannel:
		http.NotFound(w, req)
	case req.Method == http.MethodGet:
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		r.mu.Lock()
		r.sub = w
		r.mu.Unlock()
		<-req.Context().Done()
		r.mu.Lock()
		if r.sub == w {
			r.sub = nil
		}
		r.mu.Unlock()
	case req.Method == http.MethodPost:
		body, err := io.ReadAll(req.Body)
		if err != nil || bytes.ContainsAny(body, "\r\n") {
			http.Error(w, "the floor relays one-line JSON bodies", http.StatusBadRequest)
			return
		}
		ev := make([]byte, 0, len(body)+64)
		ev = fmt.Appendf(ev, "id: %s\ndata: ", req.Header.Get(webhooks.HeaderDelivery))
		ev = append(append(ev, body...), "\n\n"...)
		r.mu.Lock()
		if r.sub == nil {
			r.mu.Unlock()
			http.Error(w, "nobody reads the channel", http.StatusServiceUnavailable)
			return
		}
		_, err = r.sub.Write(ev)
		if err == nil {
			err = http.NewResponseController(r.sub).Flush()
		}
		r.mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	default:
		http.Error(w, "GET or POST", http.StatusMethodNotAllowed)
	}
}

func floorForward(ctx context.Context, url, target string) error {
	runtime.GOMAXPROCS(1)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	client := &http.Client{}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	var id string
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return err
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		if v, ok := bytes.CutPrefix(line, []byte("id: ")); ok {
			id = string(v)
			continue
		}
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue
		}
		post, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(data))
		if err != nil {
			return err
		}
		post.Header.Set("Content-Type", "application/json")
		post.Header.Set(webhooks.HeaderDelivery, id)
		answer, err := client.Do(post)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, answer.Body)
		answer.Body.Close()
	}
}
