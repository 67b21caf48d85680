package tlogstoretest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
)

// testTimestamps checks the storage of checkpoint time-stamps (migration
// 0017) and the index of cosigned checkpoints: written once, found by
// size, the unstamped ones listed above a floor in size order.
func testTimestamps(t *testing.T, db DB) {
	ctx := context.Background()
	ts, ci := db.Storage.Timestamps, db.Storage.Cosigned
	if ts == nil || ci == nil {
		t.Fatal("the store's log storage has no Timestamps or Cosigned")
	}
	l := NewLog(t, db.Storage, tlog.Config{})
	for _, n := range []int64{2, 2, 1} { // checkpoints of 2, 4 and 5 leaves
		size, _ := l.LatestCheckpoint(ctx)
		db.Append(t, "ts", int64(size.Size), n)
		tlogtest.IntegrateAll(t, l)
	}
	sizes := func(cps []tlog.StoredCheckpoint) []uint64 {
		var out []uint64
		for _, c := range cps {
			note, err := db.Storage.Checkpoint(ctx, c.Size)
			if err != nil || !bytes.Equal(note, c.Note) {
				t.Fatalf("unstamped checkpoint %d: note differs from the stored one (%v)", c.Size, err)
			}
			out = append(out, c.Size)
		}
		return out
	}
	unstamped := func(after uint64, limit int) []uint64 {
		t.Helper()
		cps, err := ts.Unstamped(ctx, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		return sizes(cps)
	}
	if _, err := ts.LastStamped(ctx); !errors.Is(err, tlog.ErrNotFound) {
		t.Fatalf("LastStamped with none: %v", err)
	}
	if got := unstamped(0, 10); !slices.Equal(got, []uint64{2, 4, 5}) {
		t.Fatalf("unstamped %v, want [2 4 5]", got)
	}
	if err := ts.AddTimestamp(ctx, 4, []byte("r4"), time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := ts.AddTimestamp(ctx, 4, []byte("other"), time.Now()); err != nil {
		t.Fatalf("a second time-stamp for a size: %v, want no error", err)
	}
	if r, err := ts.Timestamp(ctx, 4); err != nil || string(r) != "r4" {
		t.Fatalf("Timestamp(4) = %q, %v; want the first one stored", r, err)
	}
	if _, err := ts.Timestamp(ctx, 2); !errors.Is(err, tlog.ErrNotFound) {
		t.Fatalf("Timestamp of an unstamped checkpoint: %v", err)
	}
	if err := ts.AddTimestamp(ctx, 7, []byte("r7"), time.Now()); err == nil {
		t.Fatal("a time-stamp for a size never signed was stored")
	}
	if n, err := ts.LastStamped(ctx); err != nil || n != 4 {
		t.Fatalf("LastStamped = %d, %v; want 4", n, err)
	}
	for _, c := range []struct {
		after uint64
		limit int
		want  []uint64
	}{{0, 10, []uint64{2, 5}}, {4, 10, []uint64{5}}, {0, 1, []uint64{2}}, {5, 10, nil}} {
		if got := unstamped(c.after, c.limit); !slices.Equal(got, c.want) {
			t.Errorf("Unstamped(%d, %d) = %v, want %v", c.after, c.limit, got, c.want)
		}
	}

	for _, c := range []struct {
		size uint64
		line string
	}{{2, "a"}, {5, "a"}, {5, "b"}} {
		if err := db.Storage.AddCosignature(ctx, c.size, []byte(c.line)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		below uint64
		limit int
		want  []uint64
	}{{100, 10, []uint64{5, 2}}, {5, 10, []uint64{2}}, {100, 1, []uint64{5}}, {2, 10, nil}} {
		got, err := ci.CosignedSizes(ctx, c.below, c.limit)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("CosignedSizes(%d, %d) = %v, %v; want %v", c.below, c.limit, got, err, c.want)
		}
	}
}
