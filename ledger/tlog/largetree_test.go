package tlog_test

import (
	"context"
	"errors"
	"testing"

	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/ledger/tlog/tlogstoretest"
	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
)

// A tree past 65,536 leaves has a full level-1 tile and a level-2 tile; it
// is built over in-memory storage to keep the test fast, and checked with
// sumdb/tlog like the stores' logs (tlogstoretest).
func TestLargeTreeTiles(t *testing.T) {
	t.Parallel()
	_, vkeys := tlogstoretest.Keys(t)
	ctx := context.Background()
	m := tlog.NewMemStorage()
	l := tlogstoretest.NewLog(t, m.Storage(), tlog.Config{BatchSize: 4096})
	m.AddPending(0, 65000)
	tlogtest.IntegrateAll(t, l)
	oldSize, oldRoot, _ := tlogtest.LatestCheckpoint(t, l, vkeys[0])
	m.AddPending(65000, 539)
	tlogtest.IntegrateAll(t, l)
	size, root, _ := tlogtest.LatestCheckpoint(t, l, vkeys[0])
	if size != 65539 {
		t.Fatalf("size %d", size)
	}
	if err := tlogstoretest.CheckTiles(l, size, root, oldSize, oldRoot); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Tile(ctx, 1, 0, 256); err != nil {
		t.Fatalf("full level-1 tile: %v", err)
	}
	if _, err := l.Tile(ctx, 2, 0, 1); err != nil {
		t.Fatalf("partial level-2 tile: %v", err)
	}
	if _, err := l.Tile(ctx, 2, 0, 2); !errors.Is(err, tlog.ErrNotFound) {
		t.Fatalf("tile beyond the tree: %v", err)
	}
}
