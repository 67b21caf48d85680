// Package pgstore is the PostgreSQL ledger.Store, through pgx/v5.
//
// The store connects with the URL it is given and does SET ROLE
// acsledger_writer on every connection, so the database enforces what the
// service may do: INSERT and SELECT on the evidence tables, UPDATE of the
// chain heads only (see migrations/postgres and docs/storage.md). The
// service's URL names the acsledger_writer login itself, which cannot
// RESET ROLE into anything more; Open never migrates and refuses a schema
// older than the code. Behind a PgBouncer the URL says how it pools
// (pgbouncer.go). Migrate runs as the URL's own role, which must own
// the schema (docs/operations.md, "Database roles").
//
// Concurrent Appends share commits (ledger/internal/groupcommit).
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/internal/groupcommit"
	"github.com/acsledger/acsledger/ledger/internal/plan"
	"github.com/acsledger/acsledger/ledger/internal/sqlstore"
	"github.com/acsledger/acsledger/migrations"
)

// WriterRole is the role the store acts as. Migrations create it.
const WriterRole = "acsledger_writer"

// Options tune the PostgreSQL store.
type Options struct {
	ledger.Options

	// Committers is the number of group-commit queues, each with at most
	// one transaction in flight; a session always uses the same one, so
	// committers never race each other for a head. 0 means 2.
	Committers int
	// MaxBatch caps the entries written in one group commit; 0 means 512.
	MaxBatch int
	// MaxDelay is how long a committer that found other appends waiting
	// lingers for more before committing; a lone append never waits. 0
	// means no lingering: a group is whatever queued while the previous
	// commit ran; lingering did not pay on the 2-core development machine.
	MaxDelay time.Duration
	// MaxConns is the connection pool size; 0 means Committers + 8.
	MaxConns int32
	// CommitTimeout bounds a group commit's transaction; 0 means 15s. A
	// primary that stalls without closing its connections (frozen, or cut
	// off by the network) would otherwise hold every append of its
	// committer; after the timeout the waiting steps get the failure
	// posture and the connection is dropped, so that the next one finds
	// the new primary (docs/operations.md, "Patroni").
	CommitTimeout time.Duration
}

// pingTimeout bounds the liveness check of a connection taken from the
// pool after it sat idle, unless the URL sets pool_ping_timeout: a
// connection to a stalled server is dropped after it instead of hanging.
const pingTimeout = 5 * time.Second

// Store is the PostgreSQL ledger.Store: ledger/internal/sqlstore's over
// this package's driver (driver.go), with the write path of appends and
// ingests (append.go, ingestwrite.go) and the read replica's WAL
// positions (replica.go) its own.
type Store struct {
	*sqlstore.Store
	pool  *pgxpool.Pool
	opts  Options
	heads headCache

	commits     atomic.Int64             // append transactions committed
	replans     atomic.Int64             // transactions retried after losing a race
	beforeWrite func(p *plan.Plan) error // test hook, nil outside tests
}

// The Store has every role of the ledger; storeopen asserts each
// (storeopen.Store).
var _ ledger.Store = (*Store)(nil)

// Open connects to the database at url (which Migrate must have prepared)
// and starts the committers.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	if opts.Committers <= 0 {
		opts.Committers = 2
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = int32(opts.Committers) + 8
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("couldn't parse database URL: %w", err)
	}
	cfg.MaxConns = opts.MaxConns
	if cfg.PingTimeout <= 0 {
		cfg.PingTimeout = pingTimeout
	}
	if opts.CommitTimeout <= 0 {
		opts.CommitTimeout = 15 * time.Second
	}
	txPooled, err := applyBouncer(cfg.ConnConfig)
	if err != nil {
		return nil, err
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if txPooled {
			return checkWriterLogin(ctx, c)
		}
		if _, err := c.Exec(ctx, "SET ROLE "+WriterRole); err != nil {
			return fmt.Errorf("couldn't SET ROLE %s (has Migrate run, and is the connecting role a member?): %w", WriterRole, err)
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("couldn't connect to the database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("couldn't connect to the database: %w", err)
	}
	if err := checkSchema(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	s := &Store{pool: pool, opts: opts}
	s.Store = sqlstore.New(sqlstore.Config{
		Driver: &driver{s: s, pool: &querier{pool}}, Dialect: dialect{}, Queries: shared, Options: opts.Options,
		Commit: groupcommit.Options{Queues: opts.Committers, MaxBatch: opts.MaxBatch, MaxDelay: opts.MaxDelay, Timeout: opts.CommitTimeout},
	})
	return s, nil
}

// Ping reports whether the store can take an append now: a connection
// answers and the server is a primary, not a read-only standby.
func (s *Store) Ping(ctx context.Context) error {
	var standby bool
	if err := s.pool.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&standby); err != nil {
		return fmt.Errorf("couldn't reach the database: %w", err)
	}
	if standby {
		return errors.New("the database is a read-only standby")
	}
	return nil
}

// checkSchema refuses a database whose schema is older than this code's
// migrations. Open never migrates: the service connects as the writer
// role, which may not change the schema; only Migrate, as the owner, does.
func checkSchema(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := migrations.Postgres()
	if err != nil {
		return err
	}
	missing, err := pendingMigrations(ctx, pool, ms)
	if err != nil {
		return fmt.Errorf("couldn't read the schema version (run `acsledger migrate` as the database owner first): %w", err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("the database lacks migrations %v of this acsledger: run `acsledger migrate` as the database owner first", missing)
	}
	return nil
}

// pendingMigrations returns the versions of ms that schema_migrations does
// not list.
func pendingMigrations(ctx context.Context, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, ms []migrations.Migration) ([]int, error) {
	rows, err := db.Query(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return nil, err
	}
	applied, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, err
	}
	var missing []int
	for _, m := range ms {
		if !slices.Contains(applied, m.Version) {
			missing = append(missing, m.Version)
		}
	}
	return missing, nil
}

// Close stops the committers, after they have written what was queued, and
// closes the pool.
func (s *Store) Close() error {
	s.Store.Close()
	s.pool.Close()
	return nil
}

// inTx runs fn in one transaction and commits it if fn returns nil. Every
// transaction of the package goes through here. Rollback runs on a context
// that outlives the caller's, so a cancelled caller still releases its
// locks promptly.
func inTx(ctx context.Context, db interface {
	Begin(context.Context) (pgx.Tx, error)
}, fn func(pgx.Tx) error) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("couldn't begin transaction: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("couldn't commit: %w", err)
	}
	return nil
}

// Migrate applies every pending migration of migrations/postgres to the
// database at url, as the URL's role (the schema owner). Each migration runs
// in its own transaction under an advisory lock, so concurrent Migrate
// calls are safe; applied versions are recorded in schema_migrations.
func Migrate(ctx context.Context, url string) error {
	ms, err := migrations.Postgres()
	if err != nil {
		return err
	}
	conn, err := Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("couldn't connect to the database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// A schema already at this code's version needs nothing, not even the
	// right to create tables: a login that may only read schema_migrations
	// (the writer) finds it so without touching the schema.
	if missing, err := pendingMigrations(ctx, conn, ms); err == nil && len(missing) == 0 {
		return nil
	}
	for _, m := range ms {
		err := inTx(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('acsledger schema_migrations'))"); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
				version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
				return err
			}
			var applied bool
			if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT FROM schema_migrations WHERE version = $1)", m.Version).Scan(&applied); err != nil {
				return err
			}
			if applied {
				return nil
			}
			// No arguments: the simple protocol runs a multi-statement file.
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name)
			return err
		})
		if err != nil {
			return fmt.Errorf("couldn't apply migration postgres/%s: %w", m.Name, err)
		}
	}
	return nil
}

// retryable reports errors after which replanning from fresh state can
// succeed: a lost head compare-and-swap, a concurrent insert of the same
// position or step, a deadlock or serialization failure.
func retryable(err error) bool {
	if errors.Is(err, sqlstore.ErrHeadMoved) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "23505", "40P01", "40001":
			return true
		}
	}
	return false
}

// Pool returns the store's connection pool, whose connections act as the
// writer role, for tests and tools that use the tables directly
// (internal/tlogdb). The Merkle log's storage (LogStorage) shares it.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
