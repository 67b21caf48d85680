package tlog

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
	"github.com/jackc/pgx/v5/pgxpool"
	sumtlog "golang.org/x/mod/sumdb/tlog"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func openPG(t testing.TB) (writer, owner *pgxpool.Pool) { return tlogtest.OpenPG(t) }

func pgAppend(t testing.TB, pool *pgxpool.Pool, session string, from, n int64) {
	t.Helper()
	tlogtest.AppendPG(t, pool, session, from, n)
}

func pgAssertEveryEntryOnce(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var entries, leaves, distinct, pending, maxIdx int64
	if err := pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM entries), (SELECT count(*) FROM tlog_leaves),
		(SELECT count(DISTINCT entry_id) FROM tlog_leaves), (SELECT count(*) FROM tlog_pending),
		(SELECT coalesce(max(idx), -1) FROM tlog_leaves)`).Scan(&entries, &leaves, &distinct, &pending, &maxIdx); err != nil {
		t.Fatal(err)
	}
	if entries != leaves || leaves != distinct || pending != 0 || maxIdx != leaves-1 {
		t.Fatalf("entries %d, leaves %d (distinct %d, max idx %d), pending %d", entries, leaves, distinct, maxIdx, pending)
	}
}

func TestPGLog(t *testing.T) {
	t.Parallel()
	writer, _ := openPG(t)
	s := NewPGStorage(writer)
	_, vkeys := testKeys(t)
	ctx := context.Background()
	l := newTestLog(t, s, Config{})
	var oldSize int64
	var oldRoot [32]byte
	for round, n := range []int64{1, 300, 255, 1000} {
		pgAppend(t, writer, fmt.Sprintf("sess-%d", round), 0, n)
		integrateAll(t, l)
		signed, err := l.Checkpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		size, root := openCheckpointExternally(t, vkeys[0], signed)
		if size != oldSize+n {
			t.Fatalf("size %d, want %d", size, oldSize+n)
		}
		checkAgainstTiles(t, logTileFetcher(l), size, root, oldSize, oldRoot)
		oldSize, oldRoot = size, root
	}
	pgAssertEveryEntryOnce(t, writer)
	idx, err := s.LeafIndexByPosition(ctx, "sess-2", 7)
	if err != nil || idx != 1+300+7 {
		t.Fatalf("LeafIndexByPosition = %d, %v", idx, err)
	}
}

// An identity value that commits after a larger one must still get a leaf.
func TestPGOutOfOrderCommit(t *testing.T) {
	t.Parallel()
	writer, _ := openPG(t)
	ctx := context.Background()
	l := newTestLog(t, NewPGStorage(writer), Config{})
	slow, err := writer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Rollback(ctx)
	tlogtest.AppendPGTx(t, slow, "slow", 0, 3) // takes the smaller ids
	pgAppend(t, writer, "fast", 0, 5)
	integrateAll(t, l)
	if err := slow.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	integrateAll(t, l)
	pgAssertEveryEntryOnce(t, writer)
	idx, err := l.s.LeafIndexByPosition(ctx, "slow", 0)
	if err != nil || idx != 5 {
		t.Fatalf("slow entry 0 is leaf %d (%v), want 5", idx, err)
	}
}

func TestPGCrashRecovery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, crash := range []string{"before commit", "after commit", "before signing"} {
		t.Run(crash, func(t *testing.T) {
			t.Parallel()
			writer, _ := openPG(t)
			f := &faultyStorage{Storage: NewPGStorage(writer)}
			l := newTestLog(t, f, Config{BatchSize: 64})
			pgAppend(t, writer, "s", 0, 300)
			integrateAll(t, l)
			pgAppend(t, writer, "s", 300, 100)
			switch crash {
			case "before commit":
				f.failIntegrateBefore = true
			case "after commit":
				f.failIntegrateAfter = true
			case "before signing":
				f.failSwap = true
			}
			if _, err := l.Integrate(ctx); !errors.Is(err, errInjected) {
				t.Fatalf("Integrate = %v", err)
			}
			*f = faultyStorage{Storage: f.Storage}
			integrateAll(t, l)
			if cp, err := l.LatestCheckpoint(ctx); err != nil || cp.Size != 400 {
				t.Fatalf("after recovery in process: checkpoint %+v, %v", cp, err)
			}
			restarted := newTestLog(t, f, Config{BatchSize: 64})
			integrateAll(t, restarted)
			pgAssertEveryEntryOnce(t, writer)
			cp, _, ok, err := restarted.latest(ctx)
			if err != nil || !ok || cp.Size != 400 {
				t.Fatalf("latest checkpoint %+v, %v, %v", cp, ok, err)
			}
		})
	}
}

// Two integrators over one database: every leaf is written exactly once.
func TestPGConcurrentIntegrators(t *testing.T) {
	t.Parallel()
	writer, _ := openPG(t)
	a := newTestLog(t, NewPGStorage(writer), Config{BatchSize: 50})
	b := newTestLog(t, NewPGStorage(writer), Config{BatchSize: 50})
	pgAppend(t, writer, "s", 0, 1000)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan struct{})
	for _, l := range []*Log{a, b} {
		go func() {
			defer func() { done <- struct{}{} }()
			for ctx.Err() == nil {
				n, err := l.Integrate(ctx)
				if err == nil && n == 0 {
					return
				}
			}
		}()
	}
	<-done
	<-done
	pgAssertEveryEntryOnce(t, writer)
}

func TestPGWriterPrivileges(t *testing.T) {
	t.Parallel()
	writer, owner := openPG(t)
	ctx := context.Background()
	l := newTestLog(t, NewPGStorage(writer), Config{})
	pgAppend(t, writer, "s", 0, 300)
	integrateAll(t, l)
	for _, pool := range []*pgxpool.Pool{writer, owner} {
		for _, s := range []string{
			`UPDATE tlog_leaves SET data = '\x00' WHERE idx = 0`,
			`DELETE FROM tlog_leaves WHERE idx = 299`,
			`TRUNCATE tlog_leaves CASCADE`,
			`UPDATE tlog_tiles SET root = root`,
			`DELETE FROM tlog_tiles`,
			`DELETE FROM tlog_checkpoints`,
			`UPDATE tlog_checkpoints SET note = note`,
			`DELETE FROM tlog_head`,
			`UPDATE tlog_head SET size = 1`,
			`DELETE FROM tlog_cosignatures`,
		} {
			if _, err := pool.Exec(ctx, s); err == nil {
				t.Errorf("%s: not refused", s)
			}
		}
	}
}

// failNth fails the nth Integrate call (counting from 1) after its
// transaction committed, as a crash before the integrator hears back.
type failNth struct {
	Storage
	n, calls atomic.Int64
}

func (f *failNth) Integrate(ctx context.Context, start uint64, leaves []StoredLeaf, tiles []FullTile) error {
	if err := f.Storage.Integrate(ctx, start, leaves, tiles); err != nil {
		return err
	}
	if f.calls.Add(1) == f.n.Load() {
		return errInjected
	}
	return nil
}

// waitForSize runs until the latest checkpoint covers size leaves.
func waitForSize(t *testing.T, l *Log, size uint64) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		cp, err := l.LatestCheckpoint(context.Background())
		if err == nil && cp.Size == size {
			return
		}
		if err == nil && cp.Size > size {
			t.Fatalf("checkpoint size %d, want %d", cp.Size, size)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint for %d leaves: %+v, %v", size, cp, err)
		}
	}
}

// Log.Run catches up on a backlog in pipelined large batches: an entry
// that commits late with a small id, and a batch whose storing "fails"
// after it committed, still leave every entry with exactly one leaf, and
// the tiles check out with sumdb/tlog.
func TestPGRunCatchesUpOnBacklog(t *testing.T) {
	t.Parallel()
	writer, _ := openPG(t)
	ctx := context.Background()
	slow, err := writer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Rollback(ctx)
	tlogtest.AppendPGTx(t, slow, "slow", 0, 3) // takes the smallest ids
	for i := range 10 {
		pgAppend(t, writer, fmt.Sprintf("sess-%d", i), 0, 250)
	}
	f := &failNth{Storage: NewPGStorage(writer)}
	f.n.Store(4) // the third batch of the first catch-up
	_, vkeys := testKeys(t)
	l := newTestLog(t, f, Config{BatchSize: 20, BacklogBatchSize: 100, BatchDelay: 10 * time.Millisecond})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v", err)
		}
	}()
	waitForSize(t, l, 2500)
	if err := slow.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	l.Notify()
	waitForSize(t, l, 2503)
	pgAssertEveryEntryOnce(t, writer)
	if f.calls.Load() < 25 {
		t.Fatalf("%d Integrate calls; catching up 2,500 entries in batches of 100 needs at least 25", f.calls.Load())
	}
	if idx, err := l.s.LeafIndexByPosition(ctx, "slow", 2); err != nil || idx != 2502 {
		t.Fatalf("slow entry 2 is leaf %d (%v), want 2502", idx, err)
	}
	for i := range 10 {
		idx, err := l.s.LeafIndexByPosition(ctx, fmt.Sprintf("sess-%d", i), 249)
		if err != nil || idx != uint64(250*i+249) {
			t.Fatalf("sess-%d entry 249 is leaf %d (%v), want %d", i, idx, err, 250*i+249)
		}
	}
	signed, err := l.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	size, root := openCheckpointExternally(t, vkeys[0], signed)
	checkAgainstTiles(t, logTileFetcher(l), size, root, 0, sumtlog.Hash{})
}
