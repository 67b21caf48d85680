package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// bouncerParam is the URL parameter that says a PgBouncer stands between
// the store and PostgreSQL and how it pools: pgbouncer=session or
// pgbouncer=transaction (docs/storage.md, "Through PgBouncer"). It is the
// store's, never sent to the server.
const bouncerParam = "pgbouncer"

// applyBouncer takes the pgbouncer parameter out of cc and sets cc up for
// the pooling mode it names. It reports whether the pooler switches
// server connections between transactions (pgbouncer=transaction).
//
// Under transaction pooling a client's statements outside a transaction
// and its next transaction may run on different server connections, and
// one server connection serves many clients in turn. So the store
// relies on no session state there:
//   - no named prepared statements: pgx's default statement cache
//     prepares "stmtcache_..." on a connection and expects to find it
//     again, and two clients meeting on one server connection collide
//     (SQLSTATE 42P05, PgBouncer 1.18 does not track them). The store
//     caches statement descriptions instead (cache_describe): every
//     execution parses an unnamed statement in the same round trip as it
//     runs, with argument types known from the cache. A URL's own
//     default_query_exec_mode (exec, simple_protocol) is kept;
//     describe_exec, whose two round trips may land on two connections,
//     and cache_statement are refused;
//   - no SET ROLE per connection: it would stay on whichever server
//     connection ran it. The login itself must be the writer role, which
//     Open checks (session_user) on every new connection.
//
// Everything else the store does with a session is scoped to a
// transaction already: advisory locks (pg_advisory_xact_lock), SET LOCAL
// ROLE of an erasure, set_config(..., true).
func applyBouncer(cc *pgx.ConnConfig) (transaction bool, err error) {
	mode, ok := cc.RuntimeParams[bouncerParam]
	if !ok {
		return false, nil
	}
	delete(cc.RuntimeParams, bouncerParam)
	switch mode {
	case "session":
		return false, nil
	case "transaction":
		switch cc.DefaultQueryExecMode {
		case pgx.QueryExecModeCacheStatement: // pgx's default: not set by the URL, or set to what cannot work
			cc.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
		case pgx.QueryExecModeDescribeExec:
			return false, fmt.Errorf("database URL: default_query_exec_mode=describe_exec takes two round trips that a transaction-pooling PgBouncer may send to two server connections; use cache_describe (the default with pgbouncer=transaction), exec or simple_protocol")
		}
		return true, nil
	}
	return false, fmt.Errorf("database URL: %s=%q: want session or transaction (the pool_mode of the PgBouncer in front of PostgreSQL)", bouncerParam, mode)
}

// checkWriterLogin is the AfterConnect of a store behind a transaction-
// pooling PgBouncer: the login must be the writer role itself, since a SET
// ROLE would not follow the store's statements from one server connection
// to the next.
func checkWriterLogin(ctx context.Context, c *pgx.Conn) error {
	var login, current string
	if err := c.QueryRow(ctx, "SELECT session_user::text, current_user::text").Scan(&login, &current); err != nil {
		return fmt.Errorf("couldn't read the login: %w", err)
	}
	if login != WriterRole || current != WriterRole {
		return fmt.Errorf("through a transaction-pooling PgBouncer (pgbouncer=transaction) the store connects as the %s login itself and cannot SET ROLE; the URL's login is %s", WriterRole, login)
	}
	return nil
}

// Connect opens one connection to url, its pgbouncer parameter taken out
// and applied, for commands that need a connection and not a store
// (Migrate, storeopen.Reach).
func Connect(ctx context.Context, url string) (*pgx.Conn, error) {
	cc, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("couldn't parse database URL: %w", err)
	}
	if _, err := applyBouncer(cc); err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cc)
}
