package relay_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/redistest"
	"github.com/hookline/hookline/internal/testutil/testenv"
	"github.com/hookline/hookline/relay"
	"github.com/hookline/hookline/relay/redisstore"
)

// The replica benchmarks compare one relay with its history in memory (the
// default) with two relays sharing a Redis (--redis-url), on this machine:
// redis-server runs with appendonly yes and appendfsync everysec, as
// docs/DEPLOY.md recommends. Run them with (from the repository root):
//
//	go test -run '^$' -bench 'Replicas' -benchtime 2000x -count 5 ./relay/
//
// In the Redis case every POST goes alternately to replica A and replica B
// and the subscribers are shared between them, so that every delivery
// crosses Redis (an append script, then pub/sub to the other replica).

// relays returns the base URLs of the relays of a setup: one in memory, or
// two on a fresh Redis (with a replica of it for redis-2-acks, whose
// appends wait for it).
func relays(b *testing.B, setup string, opts relay.Options) []string {
	b.Helper()
	if setup == "memory-1" {
		_, ts := newRelay(b, opts)
		return []string{ts.URL}
	}
	rs := redistest.Start(b, "--appendfsync", "everysec")
	o := redisstore.Options{MinReplicas: redisstore.NoReplicas}
	if setup == "redis-2-acks" { // a Redis replica confirms each delivery before its 200 (WAIT)
		rs.StartReplica(b)
		o.MinReplicas = 1
	}
	return []string{newReplicaWith(b, rs.URL(), o, opts).ts.URL, newReplicaWith(b, rs.URL(), o, opts).ts.URL}
}

var replicaSetups = []string{"memory-1", "redis-2", "redis-2-acks"}

// BenchmarkReplicasIngest measures deliveries of 4 KiB JSON from POST to
// one subscriber's stream, with 4 parallel senders: in the Redis case the
// subscriber is on replica B and the senders alternate A and B.
func BenchmarkReplicasIngest(b *testing.B) {
	body := `{"action":"opened","pad":"` + strings.Repeat("x", 4096-len(`{"action":"opened","pad":""}`)) + `"}`
	for _, setup := range replicaSetups {
		b.Run(setup, func(b *testing.B) {
			bases := relays(b, setup, relay.Options{SubscriberQueue: 1 << 20, HistoryCount: 1 << 20, HistoryBytes: 1 << 40, TotalHistoryBytes: 1 << 40})
			u, _ := url.Parse(bases[len(bases)-1])
			conn, err := dialStream(u.Host, "/bench")
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			var got atomic.Int64
			go countEvents(conn, &got)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			// One delivery through each relay before measuring, waited for
			// at the subscriber: the stream has joined and every replica's
			// pub/sub subscription is up.
			for i, base := range bases {
				resp, err := client.Post(base+"/bench", "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				testenv.Poll(b, "the warm-up delivery at the subscriber", time.Millisecond, func() bool { return got.Load() == int64(i+1) })
			}
			got.Store(0)
			var n atomic.Int64
			b.SetBytes(int64(len(body)))
			b.SetParallelism(4)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					base := bases[int(n.Add(1))%len(bases)]
					resp, err := client.Post(base+"/bench", "application/json", strings.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("POST = %d", resp.StatusCode)
						return
					}
				}
			})
			deadline := time.Now().Add(wait)
			for got.Load() < int64(b.N) {
				if time.Now().After(deadline) {
					b.Fatalf("the subscriber got %d of %d deliveries", got.Load(), b.N)
				}
				runtime.Gosched()
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "deliveries/s")
		})
	}
}

// BenchmarkReplicasFanOutLatency measures the time from the start of a POST
// to its arrival at each of 100 subscribers, one POST at a time, and
// reports the 50th and 99th percentiles: in the Redis case half the
// subscribers are on replica A, half on B, and POSTs alternate A and B.
func BenchmarkReplicasFanOutLatency(b *testing.B) {
	const n = 100
	for _, setup := range replicaSetups {
		b.Run(setup, func(b *testing.B) {
			bases := relays(b, setup, relay.Options{MaxSubscribers: n, MaxSubscribersPerIP: n, MaxStreams: n, MaxStreamsPerIP: n})
			fanOutLatency(b, bases, n)
		})
	}
}

// BenchmarkRedisScale compares two relays on one Redis with two relays on a
// Redis Cluster of three primaries (every redis-server with appendonly yes
// and appendfsync everysec), on this machine: 4 senders POST 4 KiB
// deliveries round robin over 30 channels and both relays, to 500
// subscribers (each on one channel and one relay, 16 or 17 a channel).
// It reports the POSTs answered a second (ingest), the deliveries the
// subscribers got a second (fan-out), and per POST the CPU of this process
// (the relays, and the senders and subscribers, which are the same in
// both) and of the redis-servers. Run it with:
//
//	go test -run '^$' -bench 'RedisScale' -benchtime 3000x -count 5 ./relay/
//
// On one machine every shard shares the same cores: this measures what the
// Cluster costs, not what it gains on machines of their own.
func BenchmarkRedisScale(b *testing.B) {
	const channels, subscribers = 30, 500
	body := `{"action":"opened","pad":"` + strings.Repeat("x", 4096-len(`{"action":"opened","pad":""}`)) + `"}`
	for _, setup := range []string{"redis-1", "cluster-3"} {
		b.Run(setup, func(b *testing.B) {
			var redisURL string
			var servers []*redistest.Server
			if setup == "redis-1" {
				rs := redistest.Start(b, "--appendfsync", "everysec")
				redisURL, servers = rs.URL(), []*redistest.Server{rs}
			} else {
				c := redistest.StartCluster(b, 3, 0, "--appendfsync", "everysec")
				redisURL, servers = c.URL(), c.Nodes
			}
			opts := relay.Options{MaxSubscribers: subscribers, MaxSubscribersPerIP: subscribers, MaxStreams: subscribers, MaxStreamsPerIP: subscribers,
				SubscriberQueue: 1 << 20, HistoryCount: 1 << 20, HistoryBytes: 1 << 40, TotalHistoryBytes: 1 << 40}
			o := redisstore.Options{MinReplicas: redisstore.NoReplicas}
			bases := []string{newReplicaWith(b, redisURL, o, opts).ts.URL, newReplicaWith(b, redisURL, o, opts).ts.URL}
			var got atomic.Int64
			var perChannel [channels]int64 // the subscribers of each
			for i := range subscribers {
				perChannel[i%channels]++
				u, _ := url.Parse(bases[i%len(bases)])
				conn, err := dialStream(u.Host, fmt.Sprintf("/scale%d", i%channels))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { conn.Close() })
				go countEvents(conn, &got)
			}
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			post := func(i int) error {
				resp, err := client.Post(fmt.Sprintf("%s/scale%d", bases[i%len(bases)], i%channels), "application/json", strings.NewReader(body))
				if err != nil {
					return err
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("POST = %d", resp.StatusCode)
				}
				return nil
			}
			// One delivery on each channel before measuring, waited for at
			// its subscribers: every stream has joined and every relay's
			// feed subscription is up.
			for i := range channels {
				if err := post(i); err != nil {
					b.Fatal(err)
				}
			}
			testenv.Poll(b, "the warm-up deliveries at the subscribers", time.Millisecond, func() bool { return got.Load() == subscribers })
			got.Store(0)
			redisCPU := func() (d time.Duration) {
				for _, s := range servers {
					d += s.CPU()
				}
				return d
			}
			var n atomic.Int64
			b.SetBytes(int64(len(body)))
			b.SetParallelism(2) // 4 senders on 2 cores
			cpu0, redis0 := processCPU(), redisCPU()
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := post(int(n.Add(1))); err != nil {
						b.Error(err)
						return
					}
				}
			})
			ingest := time.Since(start)
			want := int64(0) // what the POSTs (1 to b.N, see post) owe the subscribers
			for i := 1; i <= b.N; i++ {
				want += perChannel[i%channels]
			}
			if !testenv.Polled(time.Millisecond, func() bool { return got.Load() >= want }) {
				b.Fatalf("the subscribers got %d of %d deliveries", got.Load(), want)
			}
			all := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/ingest.Seconds(), "POST/s")
			b.ReportMetric(float64(want)/all.Seconds(), "out/s")
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/POST")
			b.ReportMetric(float64((redisCPU()-redis0).Microseconds())/float64(b.N), "redis-cpu-µs/POST")
		})
	}
}

// processCPU returns the CPU time (user + system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
