package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/internal/tlogdb"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/pgstore"
	"github.com/acsledger/acsledger/ledger/storetest"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/ledger/tlog/tlogstoretest"
	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newDBRaw returns the URL of a fresh, unmigrated database.
func newDBRaw(t testing.TB) string { return pgtest.NewDatabase(t) }

// newDB returns the URL of a fresh, migrated database.
func newDB(t testing.TB) string {
	t.Helper()
	url := pgtest.NewDatabase(t)
	if err := pgstore.Migrate(context.Background(), url); err != nil {
		t.Fatal(err)
	}
	return url
}

func openStore(t testing.TB, url string, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newStore returns the URL of a fresh, migrated database and a store over
// it.
func newStore(t testing.TB) (string, *pgstore.Store) {
	t.Helper()
	url := newDB(t)
	return url, openStore(t, url, pgstore.Options{})
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, opts ledger.Options) storetest.Roles {
		return roles(openStore(t, newDB(t), pgstore.Options{Options: opts}))
	})
}

// roles is s by the roles the conformance suite calls.
func roles(s *pgstore.Store) storetest.Roles {
	return storetest.Roles{Store: s, StepRecorder: s, StepReader: s, ParamsEraser: s, PolicyBundleStore: s}
}

// TestLogStorage runs the Merkle log storage's conformance suite.
func TestLogStorage(t *testing.T) {
	t.Parallel()
	tlogstoretest.Run(t, tlogdb.PGDB)
}

func TestIngestConformance(t *testing.T) {
	storetest.RunIngest(t, func(t *testing.T) ledger.IngestStore {
		return openStore(t, newDB(t), pgstore.Options{})
	})
}

// TestTokens runs the token suite; the statements that must fail run as
// the owner, who holds every privilege, so the triggers are what stop
// them.
func TestTokens(t *testing.T) {
	ctx := context.Background()
	url, s := newStore(t)
	owner, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx)
	storetest.RunTokens(t, s, func(stmt string) error {
		_, err := owner.Exec(ctx, stmt)
		return err
	})
}

// Neither the writer role nor the owner may change or remove what the log
// stored: the database refuses, whatever the service's code does.
func TestLogWriterPrivileges(t *testing.T) {
	t.Parallel()
	st, owner := tlogdb.PG(t)
	ctx := context.Background()
	l := tlogstoretest.NewLog(t, st.LogStorage(), tlog.Config{})
	tlogdb.AppendPG(t, st.Pool(), "s", 0, 300)
	tlogtest.IntegrateAll(t, l)
	// The writer may add a time-stamp (migration 0017), never change one.
	if err := st.LogStorage().Timestamps.AddTimestamp(ctx, 300, []byte("tsr"), time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, pool := range []*pgxpool.Pool{st.Pool(), owner} {
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
			`UPDATE tlog_timestamps SET response = '\x00'`,
			`DELETE FROM tlog_timestamps`,
			`TRUNCATE tlog_timestamps`,
		} {
			if _, err := pool.Exec(ctx, s); err == nil {
				t.Errorf("%s: not refused", s)
			}
		}
	}
}

// TestSources runs the source-record suite; the statements that must fail
// run as the owner, so the triggers are what stop them.
func TestSources(t *testing.T) {
	ctx := context.Background()
	url := newDB(t)
	owner, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx)
	storetest.RunSources(t, func(t *testing.T, opts ledger.Options) storetest.SourceStore {
		return openStore(t, url, pgstore.Options{Options: opts})
	}, func(stmt string) error {
		_, err := owner.Exec(ctx, stmt)
		return err
	})
}

// TestExport runs the export suite; the cursor that must not move back is
// moved by the owner, so the trigger is what stops it.
func TestExport(t *testing.T) {
	ctx := context.Background()
	url, s := newStore(t)
	owner, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx)
	storetest.RunExport(t, s, func(t *testing.T) {
		tlogtest.IntegrateAll(t, tlogstoretest.NewLog(t, s.LogStorage(), tlog.Config{}))
	}, func(stmt string) error {
		_, err := owner.Exec(ctx, stmt)
		return err
	})
}
