// Package redistest runs a real redis-server for tests: on loopback, on a
// free port, with its files in a temporary directory, stopped when the test
// ends. It is what the tests of the relay's Redis store (relay/redisstore,
// hookline serve --redis-url) run against.
//
// redis-server comes from Debian's package redis-server, which the
// Makefile installs before the tests (internal/testutil/testenv/install.sh).
// A test that needs it fails in CI and is skipped elsewhere when it is
// missing (see internal/testutil/testenv).
//
//	srv := redistest.Start(t)
//	opts := relay.Options{Store: redisstore.Opener(srv.URL(), redisstore.Options{})}
//	srv.Kill()    // SIGKILL: an outage
//	srv.Restart() // the same port and files: what was fsynced is back
//	srv.Pause()   // SIGSTOP: connections open, no answers (Resume: SIGCONT)
//	rep := srv.StartReplica(t)                      // a replica, its link up
//	s1 := redistest.StartSentinel(t, "hl", srv, 2) // a Sentinel watching srv as "hl"
package redistest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testutil/testenv"
)

// startTimeout bounds the wait for redis-server to answer PING.
const startTimeout = 20 * time.Second

// Server is one redis-server process. Its methods are safe for concurrent
// use.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	args []string
	conf string // a Sentinel's configuration file (StartSentinel); "" for a Redis

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	log    bytes.Buffer
}

// Start runs redis-server with append-only persistence fsynced on every
// write (so that Kill loses nothing that was acknowledged) and no RDB
// snapshots; args are more redis-server options, such as "--appendfsync",
// "everysec", which override those. It ends the test (testenv.Missing) if
// redis-server is not installed, and stops the server at the end of the
// test.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Missing(t, "redis-server", "install it with `sh internal/testutil/testenv/install.sh redis-server`")
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir(), args: args}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		s.port = port
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(s.Kill)
			return s
		}
	}
	t.Fatalf("redis-server did not start: %v", lastErr)
	return nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// start runs redis-server on s.port and waits until it answers PING.
func (s *Server) start() error {
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--appendonly", "yes",
		"--appendfsync", "always",
		"--daemonize", "no",
		"--logfile", "",
		"--loglevel", "warning",
		"--repl-diskless-sync-delay", "0", // a replica syncs at once (5 s by default, for others to join)
	}
	if s.conf != "" {
		args = append([]string{s.conf, "--sentinel"}, args[:6]...) // a Sentinel keeps no data
		args = append(args, "--daemonize", "no", "--logfile", "", "--loglevel", "warning")
	}
	args = append(args, s.args...)
	cmd := exec.Command(s.bin, args...)
	s.mu.Lock()
	cmd.Stdout = &lockedWriter{s}
	cmd.Stderr = &lockedWriter{s}
	s.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-exited:
			return fmt.Errorf("redis-server exited at once:\n%s", s.Log())
		default:
		}
		if s.ping() == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redis-server does not answer PING after %s:\n%s", startTimeout, s.Log())
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	return nil
}

// ping sends PING and expects PONG (not -LOADING while the AOF loads).
func (s *Server) ping() error {
	pong, err := s.do("PING")
	if err == nil && pong != "PONG" {
		err = fmt.Errorf("PING answered %q", pong)
	}
	return err
}

// Addr returns host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL returns the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr() }

// Kill ends the server with SIGKILL (no shutdown, no save) and waits for
// it. It does nothing if the server is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-exited
}

// Pause stops the server with SIGSTOP: connections stay open and nothing
// answers, as in a network partition. Resume continues it.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig os.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.cmd.Process.Signal(sig)
	}
}

// Restart starts the server again on the same port with the same files
// (after Kill) and waits until it answers.
func (s *Server) Restart() {
	s.t.Helper()
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond) // the port may linger
	}
	s.t.Fatalf("restarting redis-server on port %d: %v", s.port, err)
}

// Log returns what redis-server printed.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

type lockedWriter struct{ s *Server }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.log.Write(b)
}

// StartReplica starts a redis-server that replicates s, as Start does, and
// waits until its link to s is up.
func (s *Server) StartReplica(t testing.TB) *Server {
	t.Helper()
	r := Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(s.port))
	deadline := time.Now().Add(startTimeout)
	for !strings.Contains(r.Info(t, "replication"), "master_link_status:up") {
		if time.Now().After(deadline) {
			t.Fatalf("the replica on port %d has no link to %s after %s:\n%s", r.port, s.Addr(), startTimeout, r.Log())
		}
		time.Sleep(10 * time.Millisecond) // Redis tells no one when the link is up: look again
	}
	return r
}

// StartSentinel starts a Redis Sentinel (redis-server --sentinel) that
// watches primary under name, agreeing on a failure with quorum
// Sentinels; a primary silent for a second is down, and a failover may
// take 10 s.
func StartSentinel(t testing.TB, name string, primary *Server, quorum int) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Missing(t, "redis-server", "install it with `sh internal/testutil/testenv/install.sh redis-server`")
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir()}
	s.conf = s.dir + "/sentinel.conf"
	conf := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d %d\nsentinel down-after-milliseconds %[1]s 1000\nsentinel failover-timeout %[1]s 10000\nsentinel parallel-syncs %[1]s 1\n", name, primary.port, quorum)
	if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		if s.port, err = freePort(); err != nil {
			t.Fatal(err)
		}
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(s.Kill)
			return s
		}
	}
	t.Fatalf("redis-server --sentinel did not start: %v", lastErr)
	return nil
}

// Info returns the INFO section of the server (or Sentinel); "" if it
// does not answer.
func (s *Server) Info(t testing.TB, section string) string {
	t.Helper()
	info, _ := s.do("INFO", section)
	return info
}

// Port returns the server's port.
func (s *Server) Port() int { return s.port }

// Cluster is a Redis Cluster of redis-server processes on loopback:
// primaries, each with its replicas, the 16384 hash slots shared evenly by
// the primaries. A node silent for a second is failed, and one of its
// replicas takes its slots (cluster-node-timeout 1000).
type Cluster struct {
	t     testing.TB
	Nodes []*Server // the primaries first, then the replicas
	ids   []string  // each node's cluster id
}

// StartCluster starts primaries × (1 + replicas) redis-servers in cluster
// mode (with Start's persistence; args as Start's), joins them, gives each
// primary its share of the slots and its replicas, and waits until every
// node says the cluster is ok and every replica's link is up. It ends the test
// (testenv.Missing) if redis-server is not installed; the servers stop at
// the end of the test.
func StartCluster(t testing.TB, primaries, replicas int, args ...string) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	n := primaries * (1 + replicas)
	var buses []string
	for range n {
		// The cluster bus's port, by default the node's + 10000, may be
		// over 65535 or taken: one of its own.
		bus, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		buses = append(buses, strconv.Itoa(bus))
		// A replica may take over whatever its lag
		// (replica-validity-factor 0); the shards that live serve while
		// one has no primary (require-full-coverage no).
		c.Nodes = append(c.Nodes, Start(t, append([]string{"--cluster-enabled", "yes", "--cluster-port", buses[len(buses)-1],
			"--cluster-node-timeout", "1000", "--cluster-replica-validity-factor", "0", "--cluster-require-full-coverage", "no"}, args...)...))
	}
	for _, s := range c.Nodes {
		c.ids = append(c.ids, strings.TrimSpace(s.Do(t, "CLUSTER", "MYID")))
	}
	for j, s := range c.Nodes[1:] {
		c.Nodes[0].Do(t, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(s.port), buses[j+1])
	}
	const slots = 16384
	for i := range primaries {
		c.Nodes[i].Do(t, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(i*slots/primaries), strconv.Itoa((i+1)*slots/primaries-1))
	}
	// A node must know the primary it replicates by its id: wait until
	// each knows every other's (a node still in the handshake is listed
	// under an id of its own).
	c.wait("every node to know the others", func(s *Server) bool {
		nodes := s.Do(t, "CLUSTER", "NODES")
		for _, id := range c.ids {
			if !strings.Contains(nodes, id) {
				return false
			}
		}
		return !strings.Contains(nodes, "handshake")
	})
	for j, s := range c.Nodes[primaries:] {
		s.Do(t, "CLUSTER", "REPLICATE", c.ids[j%primaries])
	}
	c.wait("every node to know every slot's primary, and every replica linked", func(s *Server) bool {
		// cluster_state:ok alone is not enough: with
		// require-full-coverage no, a node says ok before it has heard of
		// every slot's primary (a client that asked it then would send
		// commands to nodes that answer MOVED).
		if info := s.Do(t, "CLUSTER", "INFO"); !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") {
			return false
		}
		info := s.Info(t, "replication")
		return strings.Contains(info, "role:master") || strings.Contains(info, "master_link_status:up")
	})
	return c
}

// wait waits until cond holds for every node.
func (c *Cluster) wait(what string, cond func(*Server) bool) {
	c.t.Helper()
	deadline := time.Now().Add(startTimeout)
	for _, s := range c.Nodes {
		for !cond(s) {
			if time.Now().After(deadline) {
				c.t.Fatalf("waited %s for %s: node %s is not there:\n%s", startTimeout, what, s.Addr(), s.Do(c.t, "CLUSTER", "NODES"))
			}
			time.Sleep(20 * time.Millisecond) // a cluster tells no one when it is ready: look again
		}
	}
}

// URL returns the cluster's redis:// URL, naming every primary.
func (c *Cluster) URL() string {
	u := "redis://" + c.Nodes[0].Addr() + "?"
	for _, s := range c.Nodes[1:] {
		u += "addr=" + s.Addr() + "&"
	}
	return strings.TrimSuffix(u, "&")
}

// PrimaryOf returns the live node that serves key now as a primary (nil
// while none does: during a failover).
func (c *Cluster) PrimaryOf(key string) *Server {
	c.t.Helper()
	slot := -1
	for _, s := range c.Nodes {
		if s.running() {
			n, err := strconv.Atoi(strings.TrimPrefix(s.Do(c.t, "CLUSTER", "KEYSLOT", key), ":"))
			if err != nil {
				c.t.Fatalf("CLUSTER KEYSLOT %s: %v", key, err)
			}
			slot = n
			break
		}
	}
	for _, s := range c.Nodes {
		if s.running() && strings.Contains(s.Info(c.t, "replication"), "role:master") && c.owns(s, slot) {
			return s
		}
	}
	return nil
}

// owns reports whether s's own line of CLUSTER NODES lists slot.
func (c *Cluster) owns(s *Server, slot int) bool {
	for _, line := range strings.Split(s.Do(c.t, "CLUSTER", "NODES"), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || !strings.Contains(f[2], "myself") {
			continue
		}
		for _, r := range f[8:] {
			lo, hi, _ := strings.Cut(r, "-")
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if hi == "" {
				b, err2 = a, nil
			}
			if err1 == nil && err2 == nil && a <= slot && slot <= b {
				return true
			}
		}
	}
	return false
}

// Flush empties every primary (FLUSHALL; replicas follow).
func (c *Cluster) Flush() {
	for _, s := range c.Nodes {
		if s.running() && strings.Contains(s.Info(c.t, "replication"), "role:master") {
			s.Do(c.t, "FLUSHALL")
		}
	}
}

func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Do sends one command and returns its answer as text: a simple or bulk
// string, an integer as ":n", an array's elements one per line; an error
// answer, or none, ends the test.
func (s *Server) Do(t testing.TB, args ...string) string {
	t.Helper()
	out, err := s.do(args...)
	if err != nil {
		t.Fatalf("%s on %s: %v", strings.Join(args, " "), s.Addr(), err)
	}
	return out
}

// do sends one command on a connection of its own and returns its answer
// (see Do).
func (s *Server) do(args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write(b.Bytes()); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(c))
}

// readReply reads one RESP2 answer as text (see Do).
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("an empty answer")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case ':':
		return line, nil
	case '-':
		return "", fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		body := make([]byte, n+2)
		if _, err := io.ReadFull(r, body); err != nil {
			return "", err
		}
		return string(body[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", err
		}
		var out []string
		for range n {
			e, err := readReply(r)
			if err != nil {
				return "", err
			}
			out = append(out, e)
		}
		return strings.Join(out, "\n"), nil
	}
	return "", fmt.Errorf("an answer %q", line)
}

// CPU returns the CPU time (user + system) the server has used, from
// /proc (0 where there is none, or after Kill).
func (s *Server) CPU() time.Duration {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command's name, which is in parentheses:
	// utime and stime are the 12th and 13th, in clock ticks (100 a second
	// on Linux).
	_, rest, _ := bytes.Cut(b, []byte(") "))
	f := strings.Fields(string(rest))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond
}
