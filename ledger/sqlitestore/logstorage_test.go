package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	sumtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/acsledger/acsledger/internal/tlogdb"
	"github.com/acsledger/acsledger/ledger/sqlitestore"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/ledger/tlog/tlogstoretest"
	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
)

// exec runs SQL as an insider who dropped the append-only triggers.
func exec(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func TestLogAppendOnlyTriggers(t *testing.T) {
	t.Parallel()
	st := tlogdb.SQLite(t)
	l := tlogstoretest.NewLog(t, st.LogStorage(), tlog.Config{})
	tlogdb.AppendSQLite(t, st, "s", 0, 300)
	tlogtest.IntegrateAll(t, l)
	if err := st.LogStorage().Timestamps.AddTimestamp(context.Background(), 300, []byte("tsr"), time.Now()); err != nil {
		t.Fatal(err)
	}
	db, _ := st.DBs()
	for _, s := range []string{
		`UPDATE tlog_timestamps SET response = x'00'`,
		`DELETE FROM tlog_timestamps`,
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

// An insider past the triggers changes the log's tables: sumdb/tlog or the
// log's own consistency checks at start notice.
func TestLogTamperingIsDetected(t *testing.T) {
	t.Parallel()
	skeys, vkeys := tlogstoretest.Keys(t)
	ctx := context.Background()
	setup := func(t *testing.T) (*sql.DB, *sqlitestore.Store, *tlog.Log) {
		st := tlogdb.SQLite(t)
		l := tlogstoretest.NewLog(t, st.LogStorage(), tlog.Config{})
		tlogdb.AppendSQLite(t, st, "s", 0, 600)
		tlogtest.IntegrateAll(t, l)
		db, _ := st.DBs()
		return db, st, l
	}
	externalCheck := func(t *testing.T, l *tlog.Log) error {
		signed, err := l.Checkpoint(ctx)
		if err != nil {
			return err
		}
		size, root := tlogtest.OpenCheckpoint(t, vkeys[0], signed)
		return tlogstoretest.CheckTiles(l, size, root, 0, sumtlog.Hash{})
	}
	reopen := func(st *sqlitestore.Store) error {
		_, err := tlog.New(ctx, st.LogStorage(), tlog.Config{Origin: tlogtest.Origin, Keys: skeys})
		return err
	}

	t.Run("modified tile", func(t *testing.T) {
		t.Parallel()
		db, st, l := setup(t)
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
		fresh := tlogstoretest.NewLog(t, st.LogStorage(), tlog.Config{}) // no tile cache
		if err := externalCheck(t, fresh); err == nil {
			t.Fatal("sumdb/tlog accepted a modified tile")
		}
	})
	t.Run("modified tile root", func(t *testing.T) {
		t.Parallel()
		db, st, _ := setup(t)
		exec(t, db, `DROP TRIGGER tlog_tiles_no_update`,
			`UPDATE tlog_tiles SET root = zeroblob(32) WHERE level = 0 AND idx = 0`)
		if err := reopen(st); !errors.Is(err, tlog.ErrInconsistent) {
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
		db, st, _ := setup(t)
		exec(t, db, `DROP TRIGGER tlog_leaves_no_delete`, `DELETE FROM tlog_leaves WHERE idx >= 590`)
		if err := reopen(st); !errors.Is(err, tlog.ErrInconsistent) {
			t.Fatalf("New over a truncated log = %v, want ErrInconsistent", err)
		}
	})
	t.Run("conflicting checkpoint for one size", func(t *testing.T) {
		t.Parallel()
		db, st, _ := setup(t)
		// An insider with the log key signs a second tree of size 600.
		var signers []note.Signer
		for _, k := range skeys {
			s, err := tlog.NewSigner(k, nil)
			if err != nil {
				t.Fatal(err)
			}
			signers = append(signers, s)
		}
		forged, err := note.Sign(&note.Note{Text: string(tlog.Checkpoint{Origin: tlogtest.Origin, Size: 600}.Marshal())}, signers...)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.LogStorage().SwapCheckpoint(ctx, true, 600, 600, forged); !errors.Is(err, tlog.ErrConflict) {
			t.Fatalf("storing a second checkpoint for 600 = %v, want ErrConflict", err)
		}
		exec(t, db, `DROP TRIGGER tlog_head_forward`, `DROP TRIGGER tlog_checkpoints_no_update`)
		if _, err := db.Exec(`UPDATE tlog_checkpoints SET note = ? WHERE size = 600`, forged); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`UPDATE tlog_head SET note = ? WHERE size = 600`, forged); err != nil {
			t.Fatal(err)
		}
		if err := reopen(st); !errors.Is(err, tlog.ErrInconsistent) {
			t.Fatalf("New with a conflicting checkpoint = %v, want ErrInconsistent", err)
		}
	})
}
