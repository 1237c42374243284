package relay

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"
)

// A replay is read a page at a time; deliveries that leave the history
// between two pages are announced with a gap event, and the replay stops
// at the channel's last id when the stream joined (later ones come live).
func TestReplayAnnouncesEvictionsBetweenPages(t *testing.T) {
	// Redis's engine pages and evicts as the contract says
	// (relay/storetest); its replicas' replays are in redis_test.go.
	for _, kind := range []string{"memory", "bolt"} {
		t.Run(kind, func(t *testing.T) {
			opts := Options{HistoryCount: 10}
			switch kind {
			case "bolt":
				opts.DataDir = t.TempDir()
			}
			s, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.CloseStorage() })
			big := func(i int) *Entry {
				return makeDelivery(nil, "", bytes.Repeat([]byte{byte('a' + i)}, 1<<20), time.Now())
			}
			for i := 1; i <= 10; i++ {
				if _, err := s.publish(t.Context(), "c", big(i)); err != nil {
					t.Fatal(err)
				}
			}
			sub := &subscriber{notify: make(chan struct{}, 1), kicked: make(chan struct{}), pins: s.pinned}
			c, rp, err := s.join(t.Context(), "c", sub, "0", true)
			if err != nil {
				t.Fatal(err)
			}
			defer s.leave(c, sub)

			var got []string
			read := func() bool {
				gap, page, done, err := rp.next(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if gap != nil {
					got = append(got, fmt.Sprintf("gap %d-%d %s", gap.From, gap.To, gap.Reason))
				}
				for _, d := range page {
					got = append(got, fmt.Sprint(d.id))
				}
				return !done
			}
			read() // the first page: 1 to 3 (4 MiB)
			for i := 11; i <= 15; i++ {
				s.publish(t.Context(), "c", big(i)) // evicts 1 to 5
			}
			for read() {
			}
			want := []string{"1", "2", "3", "gap 4-5 expired", "6", "7", "8", "9", "10"}
			if !slices.Equal(got, want) {
				t.Errorf("replay = %v, want %v", got, want)
			}
			if n := len(sub.take(nil)); n != 5 {
				t.Errorf("%d deliveries queued live, want 5 (11 to 15)", n)
			}
		})
	}
}
