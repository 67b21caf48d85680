// Package sqlstore is the SQL ledger store written once: the queries and
// the logic of reads, search, the Guardian's params and requests, erasure,
// tokens, stats, ingested records and the Merkle log's storage, over a
// Driver that runs statements and a Dialect that words what differs
// between databases (placeholders, times, lists, containment, prefixes,
// unique violations). ledger/pgstore and ledger/sqlitestore are the two
// drivers; each embeds a *Store and keeps what only its database does
// (the append and ingest write paths, COPY, roles, replicas).
package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/internal/groupcommit"
	"github.com/acsledger/acsledger/ledger/internal/plan"
	"github.com/acsledger/acsledger/ledger/tlog"
)

// Row is one result row: pgx.Row and *sql.Row are Rows.
type Row interface {
	Scan(dest ...any) error
}

// Rows is a result set: pgx.Rows is one; a driver wraps *sql.Rows.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Querier runs statements, on a connection pool or in a transaction. Exec
// returns the rows the statement affected. A missing row is reported by
// Row.Scan as an error that errors.Is sql.ErrNoRows (pgx.ErrNoRows wraps
// it).
type Querier interface {
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Driver is what a database gives the store.
type Driver interface {
	// Reader runs reads; Writer runs single-statement writes.
	Reader() Querier
	Writer() Querier
	// InTx runs fn in one write transaction and commits it if fn returns
	// nil.
	InTx(ctx context.Context, fn func(tx Querier) error) error
	// Apply plans ps against the stored heads and writes the plan in one
	// transaction (with allOrNothing, any record's error aborts it).
	Apply(ctx context.Context, ps []plan.Prepared, allOrNothing bool) (*plan.Plan, error)
	// BeginErase prepares tx, before anything else, to erase params.
	BeginErase(ctx context.Context, tx Querier) error
	// WriteLeaves inserts the Merkle log's leaves from index start and
	// its new full tiles, in tx, and takes the leaves' entries off the
	// pending queue; a leaf, tile or dequeue that another integrator got
	// to first is a tlog.ErrConflict.
	WriteLeaves(ctx context.Context, tx Querier, start uint64, leaves []tlog.StoredLeaf, tiles []tlog.FullTile) error
}

// Config is what New needs.
type Config struct {
	Driver  Driver
	Dialect Dialect
	Queries *Queries
	Options ledger.Options
	// Commit tunes the group commit of Append and AppendRequest, whose
	// transactions are the driver's Apply.
	Commit groupcommit.Options
}

// Store is the ledger store over a driver. A driver package's Store embeds
// it, so its methods are the driver's.
type Store struct {
	d         Driver
	dl        Dialect
	q         *Queries
	opts      ledger.Options
	committer *groupcommit.Committer
}

// New returns the store of c and starts its committers.
func New(c Config) *Store {
	s := &Store{d: c.Driver, dl: c.Dialect, q: c.Queries, opts: c.Options}
	s.committer = groupcommit.New(func(ctx context.Context, ps []plan.Prepared) (*plan.Plan, error) {
		return s.d.Apply(ctx, ps, false)
	}, c.Commit)
	return s
}

// Close stops the committers, after they have written what was queued. The
// driver closes its connections after.
func (s *Store) Close() error {
	s.committer.Close()
	return nil
}

// ErrHeadMoved means another writer moved or created a head between our
// read and our compare-and-swap; the write is planned again.
var ErrHeadMoved = errors.New("session head moved concurrently")

// Append implements ledger.Store through group commit: concurrent appends
// share transactions, and each returns after the one holding its entry has
// committed.
func (s *Store) Append(ctx context.Context, r ledger.Record) (ledger.Appended, error) {
	p, err := plan.Prepare(0, r, s.opts.EntryCap())
	if err != nil {
		return ledger.Appended{}, err
	}
	a, _, err := s.committer.Append(ctx, p)
	return a, err
}

// AppendBatch implements ledger.Store. It bypasses the committers: the batch
// is its own transaction.
func (s *Store) AppendBatch(ctx context.Context, rs []ledger.Record) ([]ledger.Appended, error) {
	ps := make([]plan.Prepared, len(rs))
	for i, r := range rs {
		p, err := plan.Prepare(i, r, s.opts.EntryCap())
		if err != nil {
			return nil, err
		}
		ps[i] = p
	}
	if len(ps) == 0 {
		return nil, nil
	}
	p, err := s.d.Apply(ctx, ps, true)
	if err != nil {
		return nil, err
	}
	return p.Results, nil
}

// AppendRequest implements ledger.StepRecorder. The replay key is
// inserted in the group's transaction (the driver's Apply claims it), so
// the check costs no commit of its own.
func (s *Store) AppendRequest(ctx context.Context, r ledger.Record, params []byte, seen ledger.Seen, sign func(ledger.Appended) ([]byte, error)) (ledger.Appended, []byte, error) {
	if err := plan.CheckRequest(r.SessionID, seen.RequestID, seen.Nonce); err != nil {
		return ledger.Appended{}, nil, err
	}
	if r.Writer == "" {
		r.Writer = ledger.WriterGuardian
	}
	p, err := plan.Prepare(0, r, s.opts.EntryCap())
	if err != nil {
		return ledger.Appended{}, nil, err
	}
	p.Sign, p.Params, p.Seen = sign, params, &seen
	return s.committer.Append(ctx, p)
}

// noRows reports a Row.Scan that found no row.
func noRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// HashPtr is a nullable hash column's value: nil for NULL.
func HashPtr(b []byte) *acs.Hash {
	if b == nil {
		return nil
	}
	var h acs.Hash
	copy(h[:], b)
	return &h
}

// ToolName is ledger.ToolName as a column value: NULL when none.
func ToolName(params []byte) *string {
	if t := ledger.ToolName(params); t != "" {
		return &t
	}
	return nil
}
