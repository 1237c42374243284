package relay_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookline/hookline/relay"
)

// TestAttackRealRelay runs the attacks of the "relay on the internet" list
// at full size against a real `hookline serve` process, and logs the
// figures docs/DEPLOY.md quotes: the process's peak resident memory, the
// bytes it wrote, and how late a canary sender's deliveries were answered.
// It needs a built binary and a few minutes, so it runs only when asked:
//
//	go build -o /tmp/hookline .
//	HOOKLINE_ATTACK_BIN=/tmp/hookline go test ./relay -run TestAttackRealRelay -v -timeout 30m
//
// HOOKLINE_ATTACK_ONLY=bomb,... runs some of them (bomb, bomb-disk, slow,
// uploads, bodiless, fetches, fetches-disk, redeliver). Each fails when the relay's peak resident memory
// exceeds the soft limit serve gives the garbage collector
// (Server.MemoryBound of the default options, plus 64 MiB), when a canary
// delivery fails or waits more than a second, and when chained
// redeliveries write more than 1 GiB.
func TestAttackRealRelay(t *testing.T) {
	bin := os.Getenv("HOOKLINE_ATTACK_BIN")
	if bin == "" {
		t.Skip("set HOOKLINE_ATTACK_BIN to a hookline binary to measure the attacks on a real relay")
	}
	only := os.Getenv("HOOKLINE_ATTACK_ONLY")
	run := func(name string, f func(t *testing.T, r *realRelay), args ...string) {
		if only != "" && !slices.Contains(strings.Split(only, ","), name) {
			return
		}
		t.Run(name, func(t *testing.T) {
			r := startReal(t, bin, args...)
			f(t, r)
			r.report(t)
		})
	}
	const mib = 1 << 20
	lineBreaks := "{" + strings.Repeat("\n", 25*mib-2) + "}"
	bomb := func(t *testing.T, r *realRelay) {
		ch := r.base + "/bomb-channel-0000000000"
		for range 2 {
			r.stuck(t, ch)
		}
		for range 6 {
			r.post(t, ch, lineBreaks)
		}
	}
	run("bomb", bomb)
	run("bomb-disk", bomb, "--data-dir", t.TempDir())
	run("slow", func(t *testing.T, r *realRelay) {
		var chans []string
		for i := range 20 {
			ch := fmt.Sprintf("%s/slow-channel-%010d", r.base, i)
			r.stuck(t, ch)
			chans = append(chans, ch)
		}
		body := `{"a":"` + strings.Repeat("x", 5*mib) + `"}`
		for range 10 {
			for _, ch := range chans {
				r.post(t, ch, body)
			}
		}
	})
	run("uploads", func(t *testing.T, r *realRelay) {
		stop, _ := r.canary(t)
		body := `{"a":"` + strings.Repeat("x", 25*mib-8) + `"}`
		var wg sync.WaitGroup
		var refused, sent atomic.Int32
		deadline := time.Now().Add(20 * time.Second)
		for i := range 80 { // 80 senders, each sending again as soon as answered
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					resp, err := http.Post(fmt.Sprintf("%s/upload-channel-%010d", r.base, i), "application/json", strings.NewReader(body))
					sent.Add(1)
					if err == nil {
						if resp.StatusCode == http.StatusServiceUnavailable {
							refused.Add(1)
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				}
			}()
		}
		wg.Wait()
		stop()
		t.Logf("80 senders of 25 MiB uploads for 20 s: %d of %d uploads refused with 503", refused.Load(), sent.Load())
	})
	run("bodiless", func(t *testing.T, r *realRelay) {
		// 1,000 uploads at a time that announce 1 or 25 MiB and send one
		// byte, opened again as the relay closes them, for 20 s.
		stop, _ := r.canary(t)
		var wg sync.WaitGroup
		var opened atomic.Int32
		deadline := time.Now().Add(20 * time.Second)
		for i := range 1000 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					conn, err := net.Dial("tcp", strings.TrimPrefix(r.base, "http://"))
					if err != nil {
						time.Sleep(100 * time.Millisecond) // the attack's pace when the relay refuses a connection
						continue
					}
					opened.Add(1)
					announced := 25 * mib // and half of them 1 MiB, within the allowance kept for small deliveries
					if i%2 == 0 {
						announced = mib
					}
					fmt.Fprintf(conn, "POST /bodiless-channel-%06d HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n{", i, announced)
					conn.SetReadDeadline(deadline)
					io.Copy(io.Discard, conn) // until the relay closes it, or the end
					conn.Close()
				}
			}()
		}
		wg.Wait()
		stop()
		t.Logf("1,000 bodiless uploads for 20 s: %d connections opened", opened.Load())
	})
	stalledFetches := func(t *testing.T, r *realRelay) {
		// 150 fetches of a 25 MiB body that never read, for 20 s.
		ch := r.base + "/fetch-channel-0000000000"
		r.post(t, ch, `{"a":"`+strings.Repeat("x", 25*mib-8)+`"}`)
		stop, sampled := r.canary(t)
		for range 150 {
			conn, err := net.Dial("tcp", strings.TrimPrefix(r.base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			conn.(*net.TCPConn).SetReadBuffer(4 << 10)
			t.Cleanup(func() { conn.Close() })
			fmt.Fprintf(conn, "GET /fetch-channel-0000000000/body/1 HTTP/1.1\r\nHost: x\r\n\r\n")
		}
		<-sampled // the attack lasts for 100 of the canary's deliveries (20 s)
		stop()
	}
	run("fetches", stalledFetches)
	run("fetches-disk", stalledFetches, "--data-dir", t.TempDir())
	run("redeliver", func(t *testing.T, r *realRelay) {
		ch := r.base + "/redeliver-channel-00000"
		r.post(t, ch, `{"a":"`+strings.Repeat("x", 25*mib-8)+`"}`)
		stop, _ := r.canary(t)
		before := r.written()
		codes := map[int]int{}
		id := 1
		for deadline := time.Now().Add(40 * time.Second); time.Now().Before(deadline); {
			resp, err := http.Post(fmt.Sprintf("%s/redeliver/%d", ch, id), "", nil)
			if err != nil {
				t.Fatal(err)
			}
			var a struct{ ID int }
			if json.NewDecoder(resp.Body).Decode(&a) == nil && resp.StatusCode == http.StatusOK {
				id = a.ID // chained: the next one redelivers this one
			}
			resp.Body.Close()
			codes[resp.StatusCode]++
		}
		stop()
		written := r.written() - before
		t.Logf("redeliveries for 40 s: %v; %.1f GiB written", codes, float64(written)/(1<<30))
		if written > 1<<30 {
			t.Errorf("chained redeliveries wrote %d bytes in 40 s, want under 1 GiB", written)
		}
	}, "--data-dir", t.TempDir())
}

// realRelay is a `hookline serve` process on loopback, its peak RSS
// sampled every 20 ms.
type realRelay struct {
	cmd  *exec.Cmd
	base string
	peak atomic.Int64
	done chan struct{}
	late []time.Duration // the canary's answer times
	mu   sync.Mutex
}

func startReal(t *testing.T, bin string, args ...string) *realRelay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, append([]string{"serve", "--no-color", "--addr", addr}, args...)...)
	cmd.Stderr = io.Discard
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &realRelay{cmd: cmd, base: "http://" + addr, done: make(chan struct{})}
	br := bufio.NewReader(out)
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, "listening") {
		t.Fatalf("serve: %q %v", line, err)
	}
	go io.Copy(io.Discard, br)
	go func() {
		for {
			select {
			case <-r.done:
				return
			case <-time.After(20 * time.Millisecond):
				r.peak.Store(max(r.peak.Load(), r.procField("status", "VmRSS:")<<10))
			}
		}
	}()
	t.Cleanup(func() {
		close(r.done)
		cmd.Process.Kill()
		cmd.Wait()
	})
	return r
}

// procField reads a number field of /proc/<pid>/<file> (procNumber).
func (r *realRelay) procField(file, field string) int64 {
	n, _ := procNumber(strconv.Itoa(r.cmd.Process.Pid), file, field)
	return n
}

func (r *realRelay) written() int64 { return r.procField("io", "wchar:") }

// stuck opens a stream on ch that never reads.
func (r *realRelay) stuck(t *testing.T, ch string) {
	conn, err := net.Dial("tcp", strings.TrimPrefix(r.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nX-Hookline-Stream: 1\r\n\r\n", strings.TrimPrefix(ch, r.base))
}

func (r *realRelay) post(t *testing.T, ch, body string) {
	resp, err := http.Post(ch, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// canary POSTs a 4 KiB delivery every 200 ms, recording how long each took
// to be answered, until stop.
// canary POSTs a delivery every 200 ms from its own address and records
// how long each took; sampled is closed after 100 of them.
func (r *realRelay) canary(t *testing.T) (stop func(), sampled <-chan struct{}) {
	quit := make(chan struct{})
	done := make(chan struct{})
	hundred := make(chan struct{})
	body := bytes.Repeat([]byte("x"), 4<<10)
	go func() {
		defer close(done)
		// From another address than the attacks' (all of 127/8 is
		// loopback on Linux): the per-address limits are not the canary's.
		client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		samples := 0
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			start := time.Now()
			resp, err := client.Post(r.base+"/canary-channel-000000", "application/json", bytes.NewReader(append(append([]byte(`{"a":"`), body...), `"}`...)))
			took := time.Since(start)
			if err != nil || resp.StatusCode != http.StatusOK {
				took = -1 // refused or failed
			}
			if err == nil {
				resp.Body.Close()
			}
			r.mu.Lock()
			r.late = append(r.late, took)
			r.mu.Unlock()
			if samples++; samples == 100 {
				close(hundred)
			}
		}
	}()
	return func() { close(quit); <-done }, hundred
}

func (r *realRelay) report(t *testing.T) {
	msg := fmt.Sprintf("peak RSS %.0f MiB", float64(r.peak.Load())/(1<<20))
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.late); n > 0 {
		failed, over := 0, 0
		var ok []time.Duration
		for _, d := range r.late {
			switch {
			case d < 0:
				failed++
			case d > time.Second:
				over++
				ok = append(ok, d)
			default:
				ok = append(ok, d)
			}
		}
		slices.Sort(ok)
		p := func(q float64) time.Duration {
			if len(ok) == 0 {
				return 0
			}
			return ok[int(q*float64(len(ok)-1))]
		}
		msg += fmt.Sprintf("; canary: %d deliveries, %d failed, %d answered after more than 1 s, p50 %s, p99 %s, max %s", n, failed, over, p(0.5).Round(time.Millisecond), p(0.99).Round(time.Millisecond), p(1).Round(time.Millisecond))
		if failed > 0 || over > 0 {
			t.Errorf("the canary's deliveries: %d failed, %d late (more than 1 s)", failed, over)
		}
	}
	t.Log(msg)
	srv, err := relay.New(relay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if bound := srv.MemoryBound() + 64<<20; r.peak.Load() > bound {
		t.Errorf("peak RSS %d bytes, above the soft memory limit serve sets (%d)", r.peak.Load(), bound)
	}
}
