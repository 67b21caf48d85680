package readroute

import (
	"testing"
	"time"

	"github.com/acsledger/acsledger/ledger/pgstore"
)

// TestStaleness: the replica is stale by the age of the oldest primary WAL
// position a measurement saw that it has not replayed; an idle primary
// makes no replica stale, however old its last commit.
func TestStaleness(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var st staleness
	for _, step := range []struct {
		name              string
		sec               int
		primary, replayed pgstore.LSN
		want              time.Duration
	}{
		{"caught up", 0, 100, 100, 0},
		{"idle primary, caught up an hour later", 3600, 100, 100, 0},
		{"behind by what this measurement saw", 3601, 200, 100, 0},
		{"still missing it a second later", 3602, 200, 100, time.Second},
		{"more written, the oldest counts", 3605, 300, 150, 4 * time.Second},
		{"replayed the first position", 3606, 300, 200, time.Second},
		{"caught up again", 3607, 300, 300, 0},
		{"paused replay on an idle primary", 3700, 300, 300, 0},
		{"paused replay, a write", 3701, 310, 300, 0},
		{"paused replay, 30 s later", 3731, 310, 300, 30 * time.Second},
	} {
		if got := st.measure(at(step.sec), step.primary, step.replayed); got != step.want {
			t.Fatalf("%s: %v, want %v", step.name, got, step.want)
		}
	}

	// A replica that stops for longer than maxSeen measurements keeps its
	// oldest position, so the figure stays exact.
	var long staleness
	for i := range 3 * maxSeen {
		got := long.measure(at(i), pgstore.LSN(1001+i), 1000)
		if want := time.Duration(i) * time.Second; got != want {
			t.Fatalf("measurement %d of a stopped replica: %v, want %v", i, got, want)
		}
	}
	if n := len(long.seen); n > maxSeen {
		t.Fatalf("%d positions kept, want at most %d", n, maxSeen)
	}
	// Once it replays half of what it missed, the figure may fall short
	// of the truth by the gaps thinning left (a few halvings: at most 2^6
	// measurements here), never exceed it.
	got := long.measure(at(3*maxSeen), pgstore.LSN(1001+3*maxSeen), pgstore.LSN(1001+3*maxSeen/2))
	if want := time.Duration(3*maxSeen/2-1) * time.Second; got > want || got < want-64*time.Second {
		t.Fatalf("after replaying half: %v, want about %v", got, want)
	}
}
