package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/acsledger/acsledger/ledger/internal/plan"
	"github.com/acsledger/acsledger/ledger/internal/sqlstore"
	"github.com/acsledger/acsledger/ledger/tlog"
)

// The store's reads and everything else but the writes of appends and
// ingests are ledger/internal/sqlstore's, over this file's driver and the
// dialect of dialect.go.

// EraserRole is the role EraseParams acts as, in its transaction only. The
// writer role the store otherwise acts as may not erase; the connecting
// role must be a member of both (migration 0005 makes the owner one).
// EraseParams therefore fails with a permission error when the URL's role
// is only the service's.
const EraserRole = "acsledger_eraser"

// driver is the store's sqlstore.Driver: the pool, whose connections act
// as the writer role, for reads and single statements; transactions on it.
type driver struct {
	s    *Store
	pool *querier
}

// pgDB is what a pool, a connection and a transaction share.
type pgDB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// querier is a sqlstore.Querier over a pool or a transaction.
type querier struct{ db pgDB }

func (q *querier) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.db.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (q *querier) Query(ctx context.Context, sql string, args ...any) (sqlstore.Rows, error) {
	rows, err := q.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (q *querier) QueryRow(ctx context.Context, sql string, args ...any) sqlstore.Row {
	return q.db.QueryRow(ctx, sql, args...)
}

func (d *driver) Reader() sqlstore.Querier { return d.pool }
func (d *driver) Writer() sqlstore.Querier { return d.pool }

func (d *driver) InTx(ctx context.Context, fn func(sqlstore.Querier) error) error {
	return inTx(ctx, d.s.pool, func(tx pgx.Tx) error { return fn(&querier{tx}) })
}

func (d *driver) Apply(ctx context.Context, ps []plan.Prepared, allOrNothing bool) (*plan.Plan, error) {
	return d.s.apply(ctx, ps, allOrNothing)
}

// BeginErase acts as EraserRole for the rest of the transaction (SET LOCAL
// ROLE).
func (d *driver) BeginErase(ctx context.Context, tx sqlstore.Querier) error {
	if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+EraserRole); err != nil {
		return fmt.Errorf("couldn't SET ROLE %s (erasing needs a role that is a member of it, such as the owner that ran migrate): %w", EraserRole, err)
	}
	return nil
}

// WriteLeaves writes leaves with COPY and tiles with one statement. The
// writer role may INSERT and SELECT on the log tables
// (migrations/postgres 0002_merkle.sql), SELECT and DELETE on the
// tlog_pending queue (which only the enqueue trigger fills, 0014) and
// UPDATE the one-row tlog_head only.
func (d *driver) WriteLeaves(ctx context.Context, on sqlstore.Querier, start uint64, leaves []tlog.StoredLeaf, tiles []tlog.FullTile) error {
	tx := on.(*querier).db.(pgx.Tx)
	// COPY is the cheapest way to write many rows. A concurrent
	// integrator inserting the same idx blocks on the primary key and
	// then fails here: the leaf insert is the compare-and-swap.
	ids := make([]int64, len(leaves))
	i := 0
	rows := pgx.CopyFromFunc(func() ([]any, error) {
		if i == len(leaves) {
			return nil, nil
		}
		l := &leaves[i]
		ids[i] = l.EntryID
		row := []any{int64(start) + int64(i), l.EntryID, l.EntryHash[:], l.Data}
		i++
		return row, nil
	})
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"tlog_leaves"}, []string{"idx", "entry_id", "entry_hash", "data"}, rows); err != nil {
		if uniqueViolation(err) {
			return fmt.Errorf("%w: %v", tlog.ErrConflict, err)
		}
		return fmt.Errorf("couldn't insert leaves: %w", err)
	}
	// Every leaf's entry must leave the queue in this transaction: this
	// check is what ties leaves to existing entries (only the entries'
	// enqueue trigger writes the queue, migration 0014) and makes a second
	// leaf for an entry impossible even without the unique key.
	tag, err := tx.Exec(ctx, q.LogDequeue, ids)
	if err != nil {
		return fmt.Errorf("couldn't dequeue entries: %w", err)
	}
	if tag.RowsAffected() != int64(len(ids)) {
		return fmt.Errorf("%w: %d of %d entries were not pending", tlog.ErrConflict, int64(len(ids))-tag.RowsAffected(), len(ids))
	}
	if err := d.writeSessionTiles(ctx, tx, start, leaves); err != nil {
		return err
	}
	if len(tiles) == 0 {
		return nil
	}
	levels := make([]int16, len(tiles))
	ns := make([]int64, len(tiles))
	data := make([][]byte, len(tiles))
	roots := make([][]byte, len(tiles))
	for i, t := range tiles {
		levels[i], ns[i], data[i], roots[i] = int16(t.Level), int64(t.N), t.Data, t.Root[:]
	}
	if _, err := tx.Exec(ctx, q.LogInsertTiles, levels, ns, data, roots); err != nil {
		if uniqueViolation(err) {
			return fmt.Errorf("%w: a tile of %d/%d..%d/%d exists: %v", tlog.ErrConflict,
				tiles[0].Level, tiles[0].N, tiles[len(tiles)-1].Level, tiles[len(tiles)-1].N, err)
		}
		return fmt.Errorf("couldn't insert tiles: %w", err)
	}
	return nil
}

// writeSessionTiles records which sessions the leaves from start fall in
// per tile of 256 (migration 0018), the index the session readers use.
func (d *driver) writeSessionTiles(ctx context.Context, tx pgx.Tx, start uint64, leaves []tlog.StoredLeaf) error {
	sts := tlog.SessionTiles(start, leaves)
	sessions := make([]string, len(sts))
	ns := make([]int64, len(sts))
	for i, st := range sts {
		sessions[i], ns[i] = st.SessionID, st.Tile
	}
	if _, err := tx.Exec(ctx, q.LogInsertSessionTiles, sessions, ns); err != nil {
		return fmt.Errorf("couldn't index the sessions of leaves %d..%d: %w", start, start+uint64(len(leaves))-1, err)
	}
	return nil
}

// uniqueViolation reports a Postgres unique_violation (23505).
func uniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}
