package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"modernc.org/sqlite" // also registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/acsledger/acsledger/ledger/internal/plan"
	"github.com/acsledger/acsledger/ledger/internal/sqlstore"
	"github.com/acsledger/acsledger/ledger/tlog"
)

// The store's reads and everything else but the writes of appends and
// ingests are ledger/internal/sqlstore's, over this file's driver and the
// dialect of dialect.go.

// driver is the store's sqlstore.Driver: reads on the read-only pool,
// writes on the one write connection, so that the Merkle log's writes
// queue behind the store's, as SQLite requires.
type driver struct {
	s           *Store
	read, write *querier
}

// sqlDB is what a *sql.DB and a *sql.Tx share.
type sqlDB interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// querier is a sqlstore.Querier over a *sql.DB or a *sql.Tx.
type querier struct{ db sqlDB }

func (q *querier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := q.db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q *querier) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	rows, err := q.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (q *querier) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	return q.db.QueryRowContext(ctx, query, args...)
}

// sqlRows is *sql.Rows as sqlstore.Rows.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

func (d *driver) Reader() sqlstore.Querier { return d.read }
func (d *driver) Writer() sqlstore.Querier { return d.write }

func (d *driver) InTx(ctx context.Context, fn func(sqlstore.Querier) error) error {
	return d.s.inTx(ctx, func(tx *sql.Tx) error { return fn(&querier{tx}) })
}

func (d *driver) Apply(ctx context.Context, ps []plan.Prepared, allOrNothing bool) (*plan.Plan, error) {
	return d.s.apply(ctx, ps, allOrNothing)
}

// BeginErase has nothing to do: SQLite has no roles.
func (d *driver) BeginErase(context.Context, sqlstore.Querier) error { return nil }

// WriteLeaves writes leaves and dequeues their entries in multi-row
// statements (per statement, SQLite and database/sql cost more than per
// row), and tiles one statement each.
func (d *driver) WriteLeaves(ctx context.Context, on sqlstore.Querier, start uint64, leaves []tlog.StoredLeaf, tiles []tlog.FullTile) error {
	tx := on.(*querier).db
	for from := 0; from < len(leaves); from += leafChunk {
		chunk := leaves[from:min(from+leafChunk, len(leaves))]
		args := make([]any, 0, 4*len(chunk))
		ids := make([]any, 0, len(chunk))
		for i, l := range chunk {
			args = append(args, int64(start)+int64(from+i), l.EntryID, l.EntryHash[:], l.Data)
			ids = append(ids, l.EntryID)
		}
		if _, err := tx.ExecContext(ctx, q.LogInsertLeaves+" "+placeholders(len(chunk), 4), args...); err != nil {
			if constraintFailed(err) {
				return fmt.Errorf("%w: an entry of leaves %d..%d already has a leaf: %v", tlog.ErrConflict, start+uint64(from), start+uint64(from+len(chunk))-1, err)
			}
			return fmt.Errorf("couldn't insert leaves %d..%d: %w", start+uint64(from), start+uint64(from+len(chunk))-1, err)
		}
		// Every leaf's entry must leave the queue in this transaction
		// (as in the Postgres store): the count check ties leaves to
		// pending, hence existing, entries.
		res, err := tx.ExecContext(ctx, q.LogDequeue+" "+placeholders(len(chunk), 1), ids...)
		if err != nil {
			return fmt.Errorf("couldn't dequeue entries: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n != int64(len(chunk)) {
			return fmt.Errorf("%w: %d of %d entries were not pending", tlog.ErrConflict, int64(len(chunk))-n, len(chunk))
		}
	}
	// The sessions per tile of 256 leaves (migration 0018), the index the
	// session readers use.
	sts := tlog.SessionTiles(start, leaves)
	for from := 0; from < len(sts); from += leafChunk {
		chunk := sts[from:min(from+leafChunk, len(sts))]
		args := make([]any, 0, 2*len(chunk))
		for _, st := range chunk {
			args = append(args, st.SessionID, st.Tile)
		}
		if _, err := tx.ExecContext(ctx, q.LogInsertSessionTiles+" "+placeholders(len(chunk), 2), args...); err != nil {
			return fmt.Errorf("couldn't index the sessions of leaves %d..%d: %w", start, start+uint64(len(leaves))-1, err)
		}
	}
	for _, t := range tiles {
		if _, err := tx.ExecContext(ctx, q.LogInsertTile,
			t.Level, int64(t.N), t.Data, t.Root[:]); err != nil {
			if constraintFailed(err) {
				return fmt.Errorf("%w: tile %d/%d exists: %v", tlog.ErrConflict, t.Level, t.N, err)
			}
			return fmt.Errorf("couldn't insert tile %d/%d: %w", t.Level, t.N, err)
		}
	}
	return nil
}

// leafChunk is the number of rows per multi-row statement.
const leafChunk = 256

// placeholders returns "(?, ?), (?, ?)" for rows of cols, or
// "(?, ?, ?)" for one column.
func placeholders(rows, cols int) string {
	var b strings.Builder
	if cols == 1 {
		b.WriteString("(?")
		b.WriteString(strings.Repeat(", ?", rows-1))
		b.WriteString(")")
		return b.String()
	}
	row := "(?" + strings.Repeat(", ?", cols-1) + ")"
	b.WriteString(row)
	for range rows - 1 {
		b.WriteString(", ")
		b.WriteString(row)
	}
	return b.String()
}

// constraintFailed reports a violated key or check (unique, primary key,
// foreign key, CHECK, NOT NULL), which is how a second write of a row the
// log writes once fails. A trigger's RAISE is not one: the append-only
// triggers refuse what the log never does.
func constraintFailed(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT && se.Code() != sqlite3.SQLITE_CONSTRAINT_TRIGGER
}

// isUnique reports a unique-key violation: another writer stored the same
// session, position or step first.
func isUnique(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && (se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
}
