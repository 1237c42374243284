package relay

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Private channels unused for Options.PrivateChannelTTL leave the store,
// in memory and in the bbolt file; one that keeps receiving deliveries,
// and one with a reader, stay. Time is simulated.
func TestUnusedPrivateChannelsExpire(t *testing.T) {
	for _, kind := range []string{"memory", "bolt"} {
		t.Run(kind, func(t *testing.T) {
			dir := ""
			if kind == "bolt" {
				dir = t.TempDir()
			}
			synctest.Test(t, func(t *testing.T) { testUnusedPrivateChannelsExpire(t, dir) })
		})
	}
}

func testUnusedPrivateChannelsExpire(t *testing.T, dir string) {
	const ttl = 8 * time.Second
	s, err := New(Options{PrivateChannelTTL: ttl, PingInterval: time.Second, DataDir: dir, CountPerChannel: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.CloseStorage()
	// at moves the bubble's clock to d after the start: the checks below
	// speak of those times.
	start := time.Now()
	at := func(d time.Duration) { time.Sleep(time.Until(start.Add(d))) } // simulated (synctest)
	mk := func() (name, token string) {
		t.Helper()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/new?private=1", nil)
		req.Header.Set("Accept", "application/json")
		s.ServeHTTP(rec, req)
		var answer struct{ URL, Token string }
		if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil || rec.Code != http.StatusOK {
			t.Fatalf("GET /new?private=1 = %d %s", rec.Code, rec.Body)
		}
		return path.Base(answer.URL), answer.Token
	}
	post := func(name string) {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/"+name, strings.NewReader("{}")))
		if rec.Code != http.StatusOK {
			t.Fatalf("POST = %d %s", rec.Code, rec.Body)
		}
	}
	held := func(name string) bool {
		a, err := s.store.Access(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		return a != nil
	}
	unused, _ := mk()
	posted, _ := mk()
	post(posted)
	read, token := mk()
	ctx, stop := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/"+read+"?token="+token, nil)
	req.Header.Set("Accept", "text/event-stream")
	streamed := make(chan struct{})
	go func() {
		defer close(streamed)
		s.ServeHTTP(httptest.NewRecorder(), req)
	}()

	at(6 * time.Second)
	post(posted)
	at(9 * time.Second)
	later, _ := mk() // expires what was unused for 8 s
	if held(unused) || !held(posted) || !held(read) || !held(later) {
		t.Errorf("at 9 s: unused held %v (want false), posted at 6 s %v, read %v, just made %v (want true)", held(unused), held(posted), held(read), held(later))
	}
	at(20 * time.Second)
	mk()
	if held(posted) || held(later) || !held(read) {
		t.Errorf("at 20 s: posted at 6 s held %v, made at 9 s held %v (want false), read held %v (want true)", held(posted), held(later), held(read))
	}
	if _, counted := s.counts.stats()[ChannelKey(posted)]; counted {
		t.Error("the removed channel still has its own delivery count")
	}
	stop()
	<-streamed
	at(40 * time.Second)
	mk()
	if held(read) {
		t.Error("at 40 s: the channel whose reader left at 20 s is still held")
	}
	if dir != "" {
		s.CloseStorage()
		reopened, err := openBolt(dir, s.store.(*ledgerStore).l.Limits, s.pinned, s.log, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer reopened.Close()
		if n := len(reopened.access); n != 1 {
			t.Errorf("the reopened file holds %d private channels, want 1 (the last made)", n)
		}
	}
}
