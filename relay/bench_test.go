package relay_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookline/hookline/relay"
)

// The benchmarks report what SPEC section 10 asks of the relay. Run them
// with (from the repository root):
//
//	go test -run '^$' -bench 'IngestToSubscriber' -benchtime 3s ./relay/
//	go test -run '^$' -bench 'IdleSubscriberMemory' -benchtime 1x ./relay/
//	go test -run '^$' -bench 'FanOutLatency' -benchtime 200x ./relay/

// helperEnv makes the test binary hold idle subscribers for
// BenchmarkIdleSubscriberMemory in a child process: a process may have only
// 20,000 open files here, and 10,000 subscribers need as many connections
// on each side.
const helperEnv = "HOOKLINE_RELAY_HOLD_SUBSCRIBERS"

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		os.Exit(holdSubscribers(spec))
	}
	os.Exit(m.Run())
}

// holdSubscribers opens N streams on URL (spec is "N URL"), reads each one's
// ready event, prints "ready", and holds them until stdin closes.
func holdSubscribers(spec string) int {
	nText, rawURL, _ := strings.Cut(spec, " ")
	n, err := strconv.Atoi(nText)
	u, uerr := url.Parse(rawURL)
	if err != nil || uerr != nil {
		fmt.Fprintln(os.Stderr, "bad", helperEnv, spec)
		return 2
	}
	conns := make([]net.Conn, 0, n)
	for i := 0; i < n; i++ {
		c, err := dialStream(u.Host, u.Path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "subscriber %d: %v\n", i, err)
			return 1
		}
		conns = append(conns, c)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		c.Close()
	}
	return 0
}

// dialStream opens a raw stream and reads up to the end of its ready event.
func dialStream(host, path string) (net.Conn, error) {
	c, err := net.Dial("tcp", host)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", path, host)
	c.SetReadDeadline(time.Now().Add(wait))
	br := bufio.NewReaderSize(c, 512)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			c.Close()
			return nil, err
		}
		if line == "event: ready\n" {
			br.ReadString('\n') // data: {}
			br.ReadString('\n') // the blank line
			c.SetReadDeadline(time.Time{})
			return &bufferedConn{Conn: c, r: br}, nil
		}
	}
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// BenchmarkIngestToSubscriber measures deliveries of 4 KiB JSON from POST to
// one subscriber's stream, with one sender and with parallel senders.
func BenchmarkIngestToSubscriber(b *testing.B) {
	body := `{"action":"opened","pad":"` + strings.Repeat("x", 4096-len(`{"action":"opened","pad":""}`)) + `"}`
	for _, tc := range []struct {
		name     string
		parallel bool
	}{{"sequential", false}, {"parallel", true}} {
		b.Run(tc.name, func(b *testing.B) {
			srv, ts := newRelay(b, relay.Options{})
			req, _ := http.NewRequest(http.MethodGet, ts.URL+"/bench", nil)
			req.Header.Set("Accept", "text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			defer resp.Body.Close()
			var got atomic.Int64
			go countEvents(resp.Body, &got) // through net/http's reader: the stream is chunked
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			send := func() {
				resp, err := client.Post(ts.URL+"/bench", "application/json", strings.NewReader(body))
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			start := time.Now()
			if tc.parallel {
				b.SetParallelism(4)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						send()
					}
				})
			} else {
				for i := 0; i < b.N; i++ {
					send()
				}
			}
			for got.Load() < int64(b.N) {
				if srv.Stats().CutOff > 0 {
					b.Fatal("the subscriber was cut off")
				}
				runtime.Gosched()
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "deliveries/s")
		})
	}
}

// BenchmarkIdleSubscriberMemory measures what one idle subscriber costs the
// relay (heap, goroutine stacks, goroutines) with 10,000 of them on one
// channel. The subscribers are held by a child process.
func BenchmarkIdleSubscriberMemory(b *testing.B) {
	const n = 10000
	for i := 0; i < b.N; i++ {
		srv, ts := newRelay(b, relay.Options{MaxSubscribers: n, MaxSubscribersPerIP: n, MaxStreams: n, MaxStreamsPerIP: n})
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		goroutines := runtime.NumGoroutine()

		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"="+strconv.Itoa(n)+" "+ts.URL+"/idle")
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
			b.Fatalf("helper: %q %v", line, err)
		}
		waitFor(b, "the subscribers", func() bool { return srv.Stats().Subscribers == n })
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/sub")
		b.ReportMetric(float64(after.StackInuse-before.StackInuse)/n, "stack-B/sub")
		b.ReportMetric(float64(runtime.NumGoroutine()-goroutines)/n, "goroutines/sub")
		stdin.Close()
		cmd.Wait()
		srv.Close()
		ts.Close()
	}
}

// BenchmarkFanOutLatency measures the time from the start of a POST to its
// arrival at each of 1,000 subscribers, and reports the 50th and 99th
// percentiles over all deliveries and subscribers.
func BenchmarkFanOutLatency(b *testing.B) {
	const n = 1000
	_, ts := newRelay(b, relay.Options{MaxSubscribers: n, MaxSubscribersPerIP: n, MaxStreams: n, MaxStreamsPerIP: n})
	fanOutLatency(b, []string{ts.URL}, n)
}

// fanOutLatency subscribes n streams to the channel "fanout", spread over
// the relays at bases, sends one delivery through each relay and waits for
// it at every subscriber (every stream has joined, every replica's pub/sub
// subscription is up), then POSTs b.N deliveries one at a time, alternating
// bases, and reports the 50th and 99th percentiles of the time from a
// POST's start to its arrival at each subscriber.
func fanOutLatency(b *testing.B, bases []string, n int) {
	var sent atomic.Int64 // UnixNano of the current POST's start
	arrivals := make(chan time.Duration, n)
	for i := 0; i < n; i++ {
		u, _ := url.Parse(bases[i%len(bases)])
		c, err := dialStream(u.Host, "/fanout")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		go func() {
			br := bufio.NewReader(c)
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					return
				}
				if bytes.HasPrefix(line, []byte("id: ")) {
					arrivals <- time.Duration(time.Now().UnixNano() - sent.Load())
				}
			}
		}()
	}
	body := `{"action":"completed","pad":"` + strings.Repeat("y", 1024) + `"}`
	for _, base := range bases {
		resp, err := http.Post(base+"/fanout", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		for j := 0; j < n; j++ {
			select {
			case <-arrivals:
			case <-time.After(wait):
				b.Fatalf("the warm-up delivery through %s reached %d of %d subscribers", base, j, n)
			}
		}
	}
	latencies := make([]time.Duration, 0, b.N*n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sent.Store(time.Now().UnixNano())
		resp, err := http.Post(bases[i%len(bases)]+"/fanout", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		for j := 0; j < n; j++ {
			select {
			case d := <-arrivals:
				latencies = append(latencies, d)
			case <-time.After(wait):
				b.Fatalf("delivery %d reached %d of %d subscribers", i, j, n)
			}
		}
	}
	b.StopTimer()
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// countEvents counts the events of the stream r (their id lines) into got,
// until r ends.
func countEvents(r io.Reader, got *atomic.Int64) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
		if bytes.HasPrefix(line, []byte("id: ")) {
			got.Add(1)
		}
	}
}
