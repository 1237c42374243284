package relay

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// failingStore is the memory store whose appends fail while full is set, as
// a bbolt store's do on a full disk.
type failingStore struct {
	*ledgerStore
	full atomic.Bool
}

func (f *failingStore) Append(ctx context.Context, channel string, d *Entry, after int64) (int64, error) {
	if f.full.Load() {
		return 0, &storeWriteError{syscall.ENOSPC}
	}
	return f.ledgerStore.Append(ctx, channel, d, after)
}

type storeWriteError struct{ err error }

func (e *storeWriteError) Error() string { return "relay: storing the delivery: " + e.err.Error() }

// /healthz tells the truth: while the history cannot be written (every POST
// gets 503) it answers 503 with the reason, and 200 again once a write
// succeeds, or a minute after the last failure (so that a load balancer
// sends traffic again). Before, it answered 200 on a full disk.
func TestHealthReportsAStoreThatCannotWrite(t *testing.T) {
	synctest.Test(t, testHealthReportsAStoreThatCannotWrite)
}

func testHealthReportsAStoreThatCannotWrite(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	fs := &failingStore{ledgerStore: s.store.(*ledgerStore)}
	s.store = fs
	health := func() (int, map[string]any) {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		var h map[string]any
		json.Unmarshal(rec.Body.Bytes(), &h)
		return rec.Code, h
	}
	post := func() int {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/healthchannel", strings.NewReader("{}")))
		return rec.Code
	}
	fs.full.Store(true)
	if code := post(); code != http.StatusServiceUnavailable {
		t.Fatalf("POST on a full disk = %d, want 503", code)
	}
	if code, h := health(); code != http.StatusServiceUnavailable || h["status"] != "history cannot be written" || !strings.Contains(h["error"].(string), "no space left") {
		t.Errorf("/healthz on a full disk = %d %v, want 503 with the reason", code, h)
	}
	time.Sleep(writeFailureTTL) // simulated (synctest)
	if code, _ := health(); code != http.StatusOK {
		t.Errorf("/healthz a minute after the last failure = %d, want 200", code)
	}
	post()
	if code, _ := health(); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz after another failure = %d, want 503", code)
	}
	fs.full.Store(false)
	if code := post(); code != http.StatusOK {
		t.Fatalf("POST after space came back = %d, want 200", code)
	}
	if code, h := health(); code != http.StatusOK || h["status"] != "ok" {
		t.Errorf("/healthz after a good write = %d %v, want 200 ok", code, h)
	}
}
