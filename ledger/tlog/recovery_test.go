package tlog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	sumtlog "golang.org/x/mod/sumdb/tlog"
)

var errInjected = errors.New("injected failure")

// faultyStorage fails chosen calls to model a crash at that point: before
// the integration transaction commits, after it commits but before the
// caller hears back, and between integration and checkpoint signing.
type faultyStorage struct {
	Storage
	failIntegrateBefore bool
	failIntegrateAfter  bool
	failSwap            bool
}

func (f *faultyStorage) Integrate(ctx context.Context, start uint64, leaves []StoredLeaf, tiles []FullTile) error {
	if f.failIntegrateBefore {
		return errInjected
	}
	if err := f.Storage.Integrate(ctx, start, leaves, tiles); err != nil {
		return err
	}
	if f.failIntegrateAfter {
		return errInjected
	}
	return nil
}

func (f *faultyStorage) SwapCheckpoint(ctx context.Context, hasOld bool, oldSize, size uint64, note []byte) error {
	if f.failSwap {
		return errInjected
	}
	return f.Storage.SwapCheckpoint(ctx, hasOld, oldSize, size, note)
}

// assertEveryEntryOnce checks that every entry has exactly one leaf, the
// queue is empty and the leaf indexes are 0..n-1.
func assertEveryEntryOnce(t *testing.T, db *sql.DB) {
	t.Helper()
	var entries, leaves, distinct, pending, maxIdx int64
	if err := db.QueryRow(`SELECT (SELECT count(*) FROM entries), (SELECT count(*) FROM tlog_leaves),
		(SELECT count(DISTINCT entry_id) FROM tlog_leaves), (SELECT count(*) FROM tlog_pending),
		(SELECT coalesce(max(idx), -1) FROM tlog_leaves)`).Scan(&entries, &leaves, &distinct, &pending, &maxIdx); err != nil {
		t.Fatal(err)
	}
	if entries != leaves || leaves != distinct || pending != 0 || maxIdx != leaves-1 {
		t.Fatalf("entries %d, leaves %d (distinct %d, max idx %d), pending %d", entries, leaves, distinct, maxIdx, pending)
	}
}

func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	_, vkeys := testKeys(t)
	ctx := context.Background()
	for _, crash := range []string{"before commit", "after commit", "before signing"} {
		t.Run(crash, func(t *testing.T) {
			t.Parallel()
			db := openSQLite(t)
			f := &faultyStorage{Storage: NewSQLiteStorage(db, db)}
			l := newTestLog(t, f, Config{BatchSize: 64})
			appendEntries(t, db, "s", 0, 300)
			integrateAll(t, l)
			appendEntries(t, db, "s", 300, 100)
			switch crash {
			case "before commit":
				f.failIntegrateBefore = true
			case "after commit":
				f.failIntegrateAfter = true
			case "before signing":
				f.failSwap = true
			}
			if _, err := l.Integrate(ctx); !errors.Is(err, errInjected) {
				t.Fatalf("Integrate = %v, want the injected failure", err)
			}
			*f = faultyStorage{Storage: f.Storage}
			// The same process carrying on recovers, and so does a restart.
			integrateAll(t, l)
			if cp, err := l.LatestCheckpoint(ctx); err != nil || cp.Size != 400 {
				t.Fatalf("after recovery in process: checkpoint %+v, %v", cp, err)
			}
			restarted := newTestLog(t, f, Config{BatchSize: 64})
			integrateAll(t, restarted)
			assertEveryEntryOnce(t, db)
			signed, err := restarted.Checkpoint(ctx)
			if err != nil {
				t.Fatal(err)
			}
			size, root := openCheckpointExternally(t, vkeys[0], signed)
			if size != 400 {
				t.Fatalf("checkpoint size %d, want 400", size)
			}
			old, err := f.Checkpoint(ctx, 300)
			if err != nil {
				t.Fatal(err)
			}
			_, oldRoot := openCheckpointExternally(t, vkeys[0], old)
			checkAgainstTiles(t, logTileFetcher(restarted), size, root, 300, oldRoot)
		})
	}
}

// exec runs SQL as an insider who dropped the append-only triggers.
func exec(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func TestAppendOnlyTriggers(t *testing.T) {
	t.Parallel()
	db := openSQLite(t)
	l := newTestLog(t, NewSQLiteStorage(db, db), Config{})
	appendEntries(t, db, "s", 0, 300)
	integrateAll(t, l)
	for _, s := range []string{
		`UPDATE tlog_leaves SET data = x'00' WHERE idx = 0`,
		`DELETE FROM tlog_leaves WHERE idx = 299`,
		`UPDATE tlog_tiles SET root = zeroblob(32)`,
		`DELETE FROM tlog_tiles`,
		`DELETE FROM tlog_checkpoints`,
		`UPDATE tlog_checkpoints SET note = x'00'`,
		`DELETE FROM tlog_head`,
		`UPDATE tlog_head SET size = 1`,
	} {
		if _, err := db.Exec(s); err == nil {
			t.Errorf("%s: not refused", s)
		}
	}
}

func TestTamperingIsDetected(t *testing.T) {
	t.Parallel()
	_, vkeys := testKeys(t)
	ctx := context.Background()
	setup := func(t *testing.T) (*sql.DB, *SQLiteStorage, *Log) {
		db := openSQLite(t)
		s := NewSQLiteStorage(db, db)
		l := newTestLog(t, s, Config{})
		appendEntries(t, db, "s", 0, 600)
		integrateAll(t, l)
		return db, s, l
	}
	externalCheck := func(t *testing.T, l *Log) error {
		signed, err := l.Checkpoint(ctx)
		if err != nil {
			return err
		}
		size, root := openCheckpointExternally(t, vkeys[0], signed)
		tree := sumtlog.Tree{N: size, Hash: root}
		hr := sumtlog.TileHashReader(tree, logTileFetcher(l))
		bundle, err := l.Tile(ctx, EntriesLevel, 0, 256)
		if err != nil {
			return err
		}
		leaves, _ := ParseBundle(bundle)
		for i, leaf := range leaves {
			p, err := sumtlog.ProveRecord(size, int64(i), hr)
			if err != nil {
				return err
			}
			if err := sumtlog.CheckRecord(p, size, root, int64(i), sumtlog.RecordHash(leaf)); err != nil {
				return err
			}
		}
		return nil
	}

	t.Run("modified tile", func(t *testing.T) {
		t.Parallel()
		db, _, l := setup(t)
		if err := externalCheck(t, l); err != nil {
			t.Fatalf("untampered log fails: %v", err)
		}
		var data []byte
		if err := db.QueryRow(`SELECT data FROM tlog_tiles WHERE level = 0 AND idx = 0`).Scan(&data); err != nil {
			t.Fatal(err)
		}
		data[100] ^= 1
		exec(t, db, `DROP TRIGGER tlog_tiles_no_update`)
		if _, err := db.Exec(`UPDATE tlog_tiles SET data = ? WHERE level = 0 AND idx = 0`, data); err != nil {
			t.Fatal(err)
		}
		fresh := newTestLog(t, NewSQLiteStorage(db, db), Config{}) // no tile cache
		if err := externalCheck(t, fresh); err == nil {
			t.Fatal("sumdb/tlog accepted a modified tile")
		}
	})
	t.Run("modified tile root", func(t *testing.T) {
		t.Parallel()
		db, s, _ := setup(t)
		exec(t, db, `DROP TRIGGER tlog_tiles_no_update`,
			`UPDATE tlog_tiles SET root = zeroblob(32) WHERE level = 0 AND idx = 0`)
		if _, err := New(ctx, s, Config{Origin: testOrigin, Keys: mustKeys(t)}); !errors.Is(err, ErrInconsistent) {
			t.Fatalf("New over a modified node = %v, want ErrInconsistent", err)
		}
	})
	t.Run("modified leaf", func(t *testing.T) {
		t.Parallel()
		db, _, l := setup(t)
		exec(t, db, `DROP TRIGGER tlog_leaves_no_update`,
			`UPDATE tlog_leaves SET data = replace(data, '"position":5,', '"position":6,') WHERE idx = 5`)
		if err := externalCheck(t, l); err == nil {
			t.Fatal("sumdb/tlog accepted a modified leaf")
		}
	})
	t.Run("truncated log", func(t *testing.T) {
		t.Parallel()
		db, s, _ := setup(t)
		exec(t, db, `DROP TRIGGER tlog_leaves_no_delete`, `DELETE FROM tlog_leaves WHERE idx >= 590`)
		if _, err := New(ctx, s, Config{Origin: testOrigin, Keys: mustKeys(t)}); !errors.Is(err, ErrInconsistent) {
			t.Fatalf("New over a truncated log = %v, want ErrInconsistent", err)
		}
	})
	t.Run("conflicting checkpoint for one size", func(t *testing.T) {
		t.Parallel()
		db, s, l := setup(t)
		// An insider with the log key signs a second tree of size 600.
		signers := l.signers
		forged, err := note.Sign(&note.Note{Text: string(Checkpoint{Origin: testOrigin, Size: 600}.Marshal())}, signers...)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SwapCheckpoint(ctx, true, 600, 600, forged); !errors.Is(err, ErrConflict) {
			t.Fatalf("storing a second checkpoint for 600 = %v, want ErrConflict", err)
		}
		exec(t, db, `DROP TRIGGER tlog_head_forward`, `DROP TRIGGER tlog_checkpoints_no_update`)
		if _, err := db.Exec(`UPDATE tlog_checkpoints SET note = ? WHERE size = 600`, forged); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`UPDATE tlog_head SET note = ? WHERE size = 600`, forged); err != nil {
			t.Fatal(err)
		}
		if _, err := New(ctx, s, Config{Origin: testOrigin, Keys: mustKeys(t)}); !errors.Is(err, ErrInconsistent) {
			t.Fatalf("New with a conflicting checkpoint = %v, want ErrInconsistent", err)
		}
	})
}

func mustKeys(t *testing.T) []string {
	skeys, _ := testKeys(t)
	return skeys
}

// Log.Run catches up on a SQLite backlog in pipelined large batches over
// the one write connection (reads wait for it), through a batch whose
// commit is reported as failed.
func TestRunCatchesUpOnBacklog(t *testing.T) {
	t.Parallel()
	db := openSQLite(t)
	for i := range 6 {
		appendEntries(t, db, fmt.Sprintf("sess-%d", i), 0, 250)
	}
	f := &failNth{Storage: NewSQLiteStorage(db, db)}
	f.n.Store(3)
	_, vkeys := testKeys(t)
	l := newTestLog(t, f, Config{BatchSize: 20, BacklogBatchSize: 128, BatchDelay: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v", err)
		}
	}()
	waitForSize(t, l, 1500)
	assertEveryEntryOnce(t, db)
	if f.calls.Load() < 12 {
		t.Fatalf("%d Integrate calls; catching up 1,500 entries in batches of 128 needs at least 12", f.calls.Load())
	}
	signed, err := l.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	size, root := openCheckpointExternally(t, vkeys[0], signed)
	checkAgainstTiles(t, logTileFetcher(l), size, root, 0, sumtlog.Hash{})
}
