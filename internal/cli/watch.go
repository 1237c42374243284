package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/hookline/hookline/capture"
	"github.com/hookline/hookline/internal/atomicfile"
	"github.com/hookline/hookline/internal/eventmatch"
	"github.com/hookline/hookline/internal/githubapi"
	"github.com/hookline/hookline/internal/httpx"
	"github.com/hookline/hookline/internal/metrics"
)

// `hookline deliveries --watch` recovers what GitHub did not deliver.
// GitHub never redelivers a failed delivery by itself; it tells teams to
// write a scheduled script that does. The watcher is that script: every
// --interval it lists the webhook's deliveries (newest first, cursor
// paging, back to what it has not looked at yet), groups the attempts by
// delivery (GUID), and for each delivery with no successful attempt whose
// first attempt is older than --grace (time for GitHub, or a person, to
// retry first), that --events keeps, and that it has not recovered
// before, it asks GitHub to redeliver it (--redeliver) or replays it here
// (--target). What it recovered is kept in a state file, so a delivery is
// recovered once, across restarts too; a delivery someone else redelivered
// successfully has a successful attempt, and is left alone. Rate limits
// are waited out, however long.

// watchState is the watcher's state file: the deliveries it recovered,
// kept for 4 days (GitHub keeps deliveries 3).
type watchState struct {
	Version   int                  `json:"version"`
	Webhook   string               `json:"webhook"`   // what it watches
	Recovered map[string]time.Time `json:"recovered"` // GUID → when
	LastPoll  time.Time            `json:"last_poll"`
}

// watchKeep is how long a recovered GUID is remembered.
const watchKeep = 4 * 24 * time.Hour

// watcher is the loop of deliveries --watch.
type watcher struct {
	gh       *githubapi.Client
	owner    githubapi.Owner
	hookID   int64
	events   eventmatch.Set
	grace    time.Duration
	window   time.Duration // how far back the first poll looks
	interval time.Duration
	path     string // the state file
	now      func() time.Time
	recover  func(ctx context.Context, d githubapi.HookDelivery) error
	out      io.Writer

	metrics http.Handler // /metrics

	mu    sync.Mutex
	state watchState
	stats watchStats
}

// watchStats are what --health shows: the counts /metrics has, and the
// last poll's time and error.
type watchStats struct {
	metrics.WatchStats
	LastPoll  time.Time `json:"last_poll,omitzero"`
	LastError string    `json:"last_error,omitempty"`
}

// load reads the state file; a missing one is a first run.
func (w *watcher) load() error {
	w.state = watchState{Version: 1, Webhook: hookName(w.owner, w.hookID), Recovered: map[string]time.Time{}}
	b, err := os.ReadFile(w.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var st watchState
	if err := json.Unmarshal(b, &st); err != nil || st.Version != 1 {
		return fmt.Errorf("%s is not a hookline watch state file (delete it to start over): %v", w.path, err)
	}
	if st.Recovered == nil {
		st.Recovered = map[string]time.Time{}
	}
	w.state = st
	return nil
}

func (w *watcher) save() error {
	b, err := json.MarshalIndent(w.state, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(w.path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(w.path, append(b, '\n'), 0o600)
}

// hookDelivery is one delivery in GitHub's record: the attempts of one
// guid, GitHub's first and the redeliveries after it.
type hookDelivery struct {
	first, last githubapi.HookDelivery
	succeeded   bool // an attempt was answered 2xx or 3xx
}

// byGUID groups a hook's deliveries as GitHub lists them (newest first; a
// redelivery is a new entry with the same guid) into one per guid, oldest
// first.
func byGUID(list []githubapi.HookDelivery) []hookDelivery {
	var out []hookDelivery
	at := map[string]int{}
	for _, d := range slices.Backward(list) { // oldest first: in the order GitHub made them
		i, ok := at[d.GUID]
		if !ok {
			i = len(out)
			at[d.GUID] = i
			out = append(out, hookDelivery{first: d})
		}
		out[i].last = d
		out[i].succeeded = out[i].succeeded || succeeded(d)
	}
	return out
}

// succeeded reports whether GitHub counts an attempt a success: a 2xx or
// 3xx answer (its status filter's "success").
func succeeded(d githubapi.HookDelivery) bool { return d.StatusCode >= 200 && d.StatusCode < 400 }

// poll looks at the deliveries once and recovers those that need it.
func (w *watcher) poll(ctx context.Context) error {
	now := w.now()
	// Back to the last poll, with room for a delivery that was within
	// --grace then; the first time, --since.
	cutoff := now.Add(-w.window)
	if last := w.state.LastPoll; !last.IsZero() {
		if since := last.Add(-w.grace - 2*w.interval); since.After(cutoff) {
			cutoff = since
		}
	}
	var list []githubapi.HookDelivery
	err := w.gh.Deliveries(ctx, w.owner, w.hookID, "", func(d githubapi.HookDelivery) bool {
		if d.DeliveredAt.Before(cutoff) {
			return false // newest first: the rest are older
		}
		list = append(list, d)
		return true
	})
	if err != nil {
		return err
	}
	var waiting, failed int64
	for _, f := range byGUID(list) {
		if f.succeeded {
			continue // delivered, by GitHub, a person or an earlier recovery
		}
		failed++
		d := f.last
		if _, done := w.state.Recovered[d.GUID]; done {
			continue
		}
		if !w.events.Empty() && !w.events.Match(eventmatch.Key{Event: d.Event, Action: actionOf(d)}) {
			continue
		}
		if now.Sub(f.first.DeliveredAt) < w.grace {
			waiting++
			continue
		}
		if err := w.recover(ctx, d); err != nil {
			return fmt.Errorf("recovering %s (%s, %s): %w", d.GUID, d.Name(), d.DeliveredAt.Local().Format(time.DateTime), err)
		}
		w.mu.Lock()
		w.state.Recovered[d.GUID] = now
		w.stats.Recovered++
		w.mu.Unlock()
		if err := w.save(); err != nil {
			return fmt.Errorf("the watch state file %s: %w (a restart may recover %s again)", w.path, err, d.GUID)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for guid, at := range w.state.Recovered {
		if now.Sub(at) > watchKeep {
			delete(w.state.Recovered, guid)
		}
	}
	w.state.LastPoll = now
	w.stats.Polls++
	w.stats.LastPoll, w.stats.LastError = now, ""
	w.stats.Failed, w.stats.Waiting = failed, waiting
	return w.save()
}

// run polls every interval until ctx ends. An error is reported and the
// next poll tries again, except GitHub refusing the credentials or the
// webhook, which no wait fixes.
func (w *watcher) run(ctx context.Context) error {
	for {
		if err := w.poll(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, githubapi.ErrUnauthorized) || errors.Is(err, githubapi.ErrNotFound) || errors.Is(err, githubapi.ErrForbidden) {
				return err
			}
			w.mu.Lock()
			w.stats.LastError = err.Error()
			w.mu.Unlock()
			fmt.Fprintf(w.out, "%s: %v; trying again in %s\n", w.now().Local().Format(time.TimeOnly), err, w.interval)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(w.interval):
		}
	}
}

// metricsStats are the counts for /metrics.
func (w *watcher) metricsStats() metrics.WatchStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats.WatchStats
}

// ServeHTTP is --health: the watcher's counts at /healthz, 503 once a poll
// failed; /metrics for Prometheus.
func (w *watcher) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/metrics" {
		w.metrics.ServeHTTP(rw, r)
		return
	}
	w.mu.Lock()
	st := w.stats
	w.mu.Unlock()
	code, status := http.StatusOK, "ok"
	if st.LastError != "" {
		code, status = http.StatusServiceUnavailable, "failing"
	}
	httpx.WriteJSON(rw, code, struct {
		Status string `json:"status"`
		watchStats
	}{status, st})
}

// runWatch is deliveries --watch.
func runWatch(ctx context.Context, o deliveriesOptions, gh *githubapi.Client, owner githubapi.Owner, hookID int64, s *streams) error {
	gh.MaxWait = 24 * time.Hour // a rate limit is waited out: there is no hurry
	w := &watcher{gh: gh, owner: owner, hookID: hookID, events: o.events, grace: o.grace, interval: o.interval,
		window: 24 * time.Hour, path: o.watchFile, now: time.Now, out: s.err}
	if !o.since.IsZero() {
		w.window = time.Since(o.since)
	}
	if w.path == "" {
		dir, err := stateDir()
		if err != nil {
			return usageErrorf("no state directory (%v): give --state-file FILE, so that a restart does not recover a delivery twice", err)
		}
		w.path = filepath.Join(dir, "watch-"+stateFileName(gh.BaseURL+"#"+hookName(owner, hookID)))
	}
	if err := w.load(); err != nil {
		return err
	}
	w.recover = func(ctx context.Context, d githubapi.HookDelivery) error {
		if o.redeliver {
			if err := gh.Redeliver(ctx, owner, hookID, d.ID); err != nil {
				return err
			}
			fmt.Fprintf(s.out, "%s asked GitHub to redeliver %s (%s, first attempt %s, answered %d)\n", time.Now().Format(time.TimeOnly), d.GUID, d.Name(), d.DeliveredAt.Local().Format(time.DateTime), d.StatusCode)
			return nil
		}
		detail, err := gh.Delivery(ctx, owner, hookID, d.ID)
		if err != nil {
			return err
		}
		cd, err := githubCapture(owner, hookID, detail)
		if err != nil {
			return err
		}
		return replayDeliveries(ctx, o.replay, []capture.File{cd}, 0, s)
	}
	if o.health != "" {
		reg := metrics.NewRegistry()
		reg.Watch(w.metricsStats)
		w.metrics = reg.Handler()
		u, closeHealth, err := serveHealth(o.health, w)
		if err != nil {
			return err
		}
		defer closeHealth()
		fmt.Fprintf(s.err, "health: %s\n", u)
	}
	how := "asks GitHub to redeliver"
	if !o.redeliver {
		how = "replays to " + describeTargets(o.replay.targets)
	}
	fmt.Fprintf(s.err, "watching %s every %s: a delivery with no successful attempt after %s %s it, once (state: %s)\n", hookName(owner, hookID), o.interval, o.grace, how, w.path)
	return w.run(ctx)
}
