package pgstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/pgstore"
	"github.com/acsledger/acsledger/ledger/storetest"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/ledger/tlog/tlogstoretest"
	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
)

// bounced is a private server with a pgbouncer in front of it.
type bounced struct {
	ps *pgtest.Server
	b  *pgtest.PgBouncer
	// login lets the writer role log in, once per server: ALTER ROLE is
	// cluster-wide, and two at once from parallel subtests fail with
	// "tuple concurrently updated".
	login sync.Once
}

func newBounced(t *testing.T, mode string) *bounced {
	t.Helper()
	ps := pgtest.NewServer(t)
	return &bounced{ps: ps, b: ps.NewPgBouncer(t, mode, pgstore.WriterRole)}
}

// db creates and migrates a database (directly, as the superuser: DDL
// does not go through the pooler) and returns its direct URL and the URL
// the store opens through pgbouncer: under transaction pooling the login
// is the writer role itself, under session pooling the superuser, which
// SETs ROLE on its own server connection.
func (bc *bounced) db(t *testing.T) (direct, store string) {
	t.Helper()
	direct = bc.ps.NewDatabase(t)
	if err := pgstore.Migrate(context.Background(), direct); err != nil {
		t.Fatal(err)
	}
	store = bc.b.URL(t, direct) + "&pgbouncer=" + bc.b.Mode
	if bc.b.Mode == "transaction" {
		bc.login.Do(func() { bc.ps.Exec(t, "ALTER ROLE "+pgstore.WriterRole+" LOGIN") })
		store = pgtest.WithUser(t, store, pgstore.WriterRole)
	}
	return direct, store
}

// TestConformanceThroughPgBouncer runs the store conformance suites with
// the store's connections going through a real pgbouncer in transaction
// pooling (the mode that broke pgx's statement cache: SQLSTATE 42P05),
// with fewer server connections than the store's pool, and the ingest
// suite, with its concurrent writers, in session pooling, which changes
// nothing the store relies on. Statements that must fail run directly as
// the superuser.
func TestConformanceThroughPgBouncer(t *testing.T) {
	ingest := func(t *testing.T, bc *bounced) {
		storetest.RunIngest(t, func(t *testing.T) ledger.IngestStore {
			_, url := bc.db(t)
			return openStore(t, url, pgstore.Options{})
		})
	}
	t.Run("session", func(t *testing.T) {
		bc := newBounced(t, "session")
		t.Run("ingest", func(t *testing.T) { ingest(t, bc) })
	})
	t.Run("transaction", func(t *testing.T) {
		bc := newBounced(t, "transaction")
		t.Run("store", func(t *testing.T) {
			storetest.Run(t, func(t *testing.T, opts ledger.Options) storetest.Roles {
				direct, url := bc.db(t)
				r := roles(openStore(t, url, pgstore.Options{Options: opts}))
				// Erasing acts as acsledger_eraser (SET LOCAL ROLE),
				// which only the owner may become: `acsledger erase`
				// connects as the owner, directly, as here.
				r.ParamsEraser = openStore(t, direct, pgstore.Options{Options: opts})
				return r
			})
		})
		t.Run("ingest", func(t *testing.T) { ingest(t, bc) })
		owner := func(t *testing.T, direct string) func(string) error {
			conn, err := pgx.Connect(context.Background(), direct)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close(context.Background()) })
			return func(stmt string) error {
				_, err := conn.Exec(context.Background(), stmt)
				return err
			}
		}
		t.Run("tokens", func(t *testing.T) {
			direct, url := bc.db(t)
			storetest.RunTokens(t, openStore(t, url, pgstore.Options{}), owner(t, direct))
		})
		t.Run("sources", func(t *testing.T) {
			direct, url := bc.db(t)
			storetest.RunSources(t, func(t *testing.T, opts ledger.Options) storetest.SourceStore {
				// The owner erases, directly (see store above).
				return sourceStore{openStore(t, url, pgstore.Options{Options: opts}), openStore(t, direct, pgstore.Options{Options: opts})}
			}, owner(t, direct))
		})
		t.Run("export", func(t *testing.T) {
			direct, url := bc.db(t)
			s := openStore(t, url, pgstore.Options{})
			storetest.RunExport(t, s, func(t *testing.T) {
				tlogtest.IntegrateAll(t, tlogstoretest.NewLog(t, s.LogStorage(), tlog.Config{}))
			}, owner(t, direct))
		})
	})
}

// TestPgBouncerURL: the pgbouncer parameter is the store's and is never
// sent to the server; a bad value, describe_exec under transaction
// pooling and a login other than the writer are refused, each naming
// what is wrong.
func TestPgBouncerURL(t *testing.T) {
	bc := newBounced(t, "transaction")
	direct, url := bc.db(t)
	ctx := context.Background()
	for _, tc := range []struct{ name, url, want string }{
		{"bad mode", url[:strings.Index(url, "&pgbouncer=")] + "&pgbouncer=statement", `pgbouncer="statement": want session or transaction`},
		{"describe_exec", url + "&default_query_exec_mode=describe_exec", "describe_exec"},
		{"superuser login", bc.b.URL(t, direct) + "&pgbouncer=transaction", "connects as the acsledger_writer login itself"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := pgstore.Open(ctx, tc.url, pgstore.Options{})
			if err == nil {
				s.Close()
				t.Fatalf("opened %s", tc.url)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to say %q", err, tc.want)
			}
		})
	}
	// Migrate and Connect take the parameter out too (through session
	// pooling here would also do; the writer cannot migrate, but finds
	// the schema current without touching it).
	if err := pgstore.Migrate(ctx, url); err != nil {
		t.Fatalf("Migrate through pgbouncer with a current schema: %v", err)
	}
}

// sourceStore is a store through the pooler whose erasures go to the
// owner's store.
type sourceStore struct {
	*pgstore.Store
	owner *pgstore.Store
}

func (s sourceStore) EraseSource(ctx context.Context, session string, position int64, reason, by string) (ledger.Erasure, error) {
	return s.owner.EraseSource(ctx, session, position, reason, by)
}
