// Package sqlitestore is the embedded ledger.Store: one SQLite file (pure Go,
// modernc.org/sqlite) in WAL mode, for single-machine deployments and the
// zero-configuration default of acsledger serve.
//
// Writes go through one connection, serialized in-process, and concurrent
// Appends share transactions (group commit); reads use a separate
// read-only pool. SQLite has no roles, so triggers alone keep the
// evidence tables append-only.
package sqlitestore

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/internal/groupcommit"
	"github.com/acsledger/acsledger/ledger/internal/plan"
	"github.com/acsledger/acsledger/ledger/internal/sqlq"
	"github.com/acsledger/acsledger/migrations"

	"modernc.org/sqlite" // also registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"
)

//go:embed queries.sql
var queriesSQL string

// queries are the named queries of queries.sql, one field each
// (sqlq.Load): a misspelt query name stops the package at initialisation,
// before any test or server runs.
type queries struct {
	SessionState, StoredByStep, InsertSession, InsertHead, MoveHead,
	InsertEntry, Session, Sessions, Entries, EntriesByStep, EntryByStep,
	InsertResponse, Response, InsertRequestParams, RequestParams,
	RecordRequest, InsertBundle, BundleDigest, PolicyBundle, PolicyBundles,
	InsertErasure, DeleteRequestParams, Erasure, LogPending, LogSize,
	LogInsertLeaves, LogDequeue, LogInsertTile, LogLeaves, LogFullTile,
	LogTileRoots, LogLeafIndexByPosition, LogLeafIndexByEntryHash, LogSessionLeaves, LogLastSessionLeaf,
	LogLatestCheckpoint, LogInsertCheckpoint, LogMoveHead, LogInsertHead,
	LogCheckpoint, LogAddCosignature, LogCosignatures string
}

var q = sqlq.Load[queries](queriesSQL)

// Store is the SQLite ledger.Store.
type Store struct {
	write     *sql.DB // one connection: SQLite allows one writer at a time
	read      *sql.DB
	opts      ledger.Options
	committer *groupcommit.Committer
}

var _ ledger.Store = (*Store)(nil)

// pragmas for every connection. synchronous=FULL keeps every commit durable
// in WAL mode (NORMAL would not sync the WAL on commit). secure_delete
// zeroes what a DELETE frees where that costs no extra I/O, so that an
// erased params record, data key included, does not linger in a free
// page of the file.
const pragmas = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)&_pragma=secure_delete(FAST)"

// Open opens (creating if needed) the database file at path and applies
// every pending migration.
func Open(ctx context.Context, path string, opts ledger.Options) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlite database path %q: must be non-empty and contain no '?' or '#'", path)
	}
	if err := ownerOnly(path); err != nil {
		return nil, err
	}
	write, err := sql.Open("sqlite", path+"?"+pragmas+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("couldn't open %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	s := &Store{write: write, opts: opts}
	if err := s.migrate(ctx); err != nil {
		write.Close()
		return nil, err
	}
	read, err := sql.Open("sqlite", path+"?"+pragmas+"&_pragma=query_only(1)")
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("couldn't open %s: %w", path, err)
	}
	read.SetMaxOpenConns(4)
	s.read = read
	// One queue: there is one writer connection anyway.
	s.committer = groupcommit.New(func(ctx context.Context, ps []plan.Prepared) (*plan.Plan, error) {
		return s.apply(ctx, ps, false)
	}, groupcommit.Options{Queues: 1})
	return s, nil
}

// Close stops the committer, after it has written what was queued, and
// closes both connection pools.
func (s *Store) Close() error {
	s.committer.Close()
	return errors.Join(s.write.Close(), s.read.Close())
}

// Ping reports whether the store's database file can be reached for
// writing.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.write.PingContext(ctx); err != nil {
		return fmt.Errorf("couldn't reach the database: %w", err)
	}
	return nil
}

// inTx runs fn in one write transaction (BEGIN IMMEDIATE) and commits it if
// fn returns nil. Every write of the store goes through here.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("couldn't begin transaction: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("couldn't commit: %w", err)
	}
	return nil
}

func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrations.SQLite()
	if err != nil {
		return err
	}
	if _, err := s.write.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("couldn't create schema_migrations: %w", err)
	}
	for _, m := range ms {
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.Version, m.Name, s.opts.Clock()().UnixMicro())
			return err
		})
		if err != nil {
			return fmt.Errorf("couldn't apply migration sqlite/%s: %w", m.Name, err)
		}
	}
	return nil
}

// Append implements ledger.Store. Concurrent appends share transactions
// (ledger/internal/groupcommit); each returns after its commit.
func (s *Store) Append(ctx context.Context, r ledger.Record) (ledger.Appended, error) {
	p, err := plan.Prepare(0, r, s.opts.EntryCap())
	if err != nil {
		return ledger.Appended{}, err
	}
	a, _, err := s.committer.Append(ctx, p)
	return a, err
}

// AppendBatch implements ledger.Store.
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
	p, err := s.apply(ctx, ps, true)
	if err != nil {
		return nil, err
	}
	return p.Results, nil
}

// errHeadMoved means another process moved a head between our read and our
// compare-and-swap; apply retries.
var errHeadMoved = errors.New("session head moved concurrently")

// apply plans ps and writes the plan in one transaction. With
// allOrNothing, any per-record error aborts the write and is returned;
// otherwise failing records are left out and their errors are in the plan.
func (s *Store) apply(ctx context.Context, ps []plan.Prepared, allOrNothing bool) (*plan.Plan, error) {
	for attempt := 0; ; attempt++ {
		var p *plan.Plan
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			var err error
			if p, err = s.plan(ctx, tx, ps); err != nil {
				return err
			}
			if allOrNothing {
				if err := p.Failed(); err != nil {
					return err
				}
			}
			return s.writePlan(ctx, tx, p)
		})
		if errors.Is(err, errHeadMoved) && attempt < 10 {
			continue
		}
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}

func (s *Store) plan(ctx context.Context, tx *sql.Tx, ps []plan.Prepared) (*plan.Plan, error) {
	states := make(map[string]plan.State)
	for _, id := range plan.SessionIDs(ps) {
		var st plan.State
		var head []byte
		err := tx.QueryRowContext(ctx, q.SessionState, id).Scan(&st.AgentID, &st.Writer, &st.Length, &head)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("couldn't read head of session %q: %w", id, err)
		}
		copy(st.Head[:], head)
		states[id] = st
	}
	stored := make(map[plan.Key]plan.Stored)
	for _, p := range ps {
		k := plan.Key{SessionID: p.SessionID, StepID: p.Entry.StepID}
		if _, ok := states[k.SessionID]; !ok {
			continue
		}
		var old plan.Stored
		var eh, ph []byte
		err := tx.QueryRowContext(ctx, q.StoredByStep, k.SessionID, k.StepID).Scan(&old.Position, &eh, &ph, &old.Content)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("couldn't look up step %q of session %q: %w", k.StepID, k.SessionID, err)
		}
		copy(old.EntryHash[:], eh)
		old.PreviousHash = hashPtr(ph)
		stored[k] = old
	}
	refused, err := claim(ctx, tx, ps)
	if err != nil {
		return nil, err
	}
	return plan.MakeExcept(ps, states, stored, refused), nil
}

// writePlan writes a plan's sessions, entries and head moves.
func (s *Store) writePlan(ctx context.Context, tx *sql.Tx, p *plan.Plan) error {
	now := s.opts.Clock()().UnixMicro()
	for _, m := range p.Moves {
		if !m.Created {
			continue
		}
		if _, err := tx.ExecContext(ctx, q.InsertSession, m.SessionID, m.AgentID, m.Writer, now); err != nil {
			if isUnique(err) {
				return errHeadMoved
			}
			return fmt.Errorf("couldn't create session %q: %w", m.SessionID, err)
		}
	}
	stmt, err := tx.PrepareContext(ctx, q.InsertEntry)
	if err != nil {
		return fmt.Errorf("couldn't prepare entry insert: %w", err)
	}
	defer stmt.Close()
	for _, r := range p.Rows {
		var prev []byte
		if r.PreviousHash != nil {
			prev = r.PreviousHash[:]
		}
		e := r.Entry
		if _, err := stmt.ExecContext(ctx, r.SessionID, r.Position, r.EntryHash[:], prev,
			e.EntryID, e.StepID, e.StepType, e.Timestamp, now, e.Content); err != nil {
			if isUnique(err) {
				return errHeadMoved
			}
			return fmt.Errorf("couldn't insert entry %d of session %q: %w", r.Position, r.SessionID, err)
		}
	}
	for i, signed := range p.Signed {
		if signed == nil || p.Results[i].Replayed || p.Errs[i] != nil {
			continue
		}
		if _, err := tx.ExecContext(ctx, q.InsertResponse, p.Results[i].SessionID, p.Results[i].Position, signed, now); err != nil {
			return fmt.Errorf("couldn't store the response of session %q position %d: %w", p.Results[i].SessionID, p.Results[i].Position, err)
		}
	}
	for i, params := range p.Params {
		if params == nil || p.Results[i].Replayed || p.Errs[i] != nil {
			continue
		}
		sealed, err := s.opts.SealParams(p.Results[i].SessionID, p.Results[i].Position, params)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, q.InsertRequestParams, p.Results[i].SessionID, p.Results[i].Position, sealed, now, toolName(params)); err != nil {
			return fmt.Errorf("couldn't store the request params of session %q position %d: %w", p.Results[i].SessionID, p.Results[i].Position, err)
		}
	}
	for _, m := range p.Moves {
		if m.Created {
			if _, err := tx.ExecContext(ctx, q.InsertHead, m.SessionID, m.ToLength, m.ToHead[:], now); err != nil {
				return fmt.Errorf("couldn't create head of session %q: %w", m.SessionID, err)
			}
			continue
		}
		// Compare-and-swap: the head moves only from the state we planned on.
		res, err := tx.ExecContext(ctx, q.MoveHead, m.ToLength, m.ToHead[:], now, m.SessionID, m.FromLength, m.FromHead[:])
		if err != nil {
			return fmt.Errorf("couldn't move head of session %q: %w", m.SessionID, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return errHeadMoved
		}
	}
	return nil
}

// Session implements ledger.Store.
func (s *Store) Session(ctx context.Context, sessionID string) (ledger.Session, error) {
	var se ledger.Session
	var head []byte
	var created, updated int64
	err := s.read.QueryRowContext(ctx, q.Session, sessionID).Scan(
		&se.SessionID, &se.AgentID, &se.Writer, &se.Length, &head, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return ledger.Session{}, fmt.Errorf("session %q: %w", sessionID, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Session{}, fmt.Errorf("couldn't read session %q: %w", sessionID, err)
	}
	copy(se.Head[:], head)
	se.CreatedAt, se.UpdatedAt = time.UnixMicro(created).UTC(), time.UnixMicro(updated).UTC()
	return se, nil
}

// Sessions implements ledger.Store.
func (s *Store) Sessions(ctx context.Context, f ledger.SessionFilter) (ledger.SessionPage, error) {
	after, err := ledger.ParseCursor(f.Cursor)
	if err != nil {
		return ledger.SessionPage{}, err
	}
	limit := ledger.PageSize(f.Limit)
	micros := func(t time.Time) any {
		if t.IsZero() {
			return nil
		}
		return t.UnixMicro()
	}
	rows, err := s.read.QueryContext(ctx, q.Sessions,
		sql.Named("after", after), sql.Named("agent", f.AgentID),
		sql.Named("since", micros(f.Since)), sql.Named("until", micros(f.Until)),
		sql.Named("step_type", f.StepType), sql.Named("limit", limit+1))
	if err != nil {
		return ledger.SessionPage{}, fmt.Errorf("couldn't list sessions: %w", err)
	}
	defer rows.Close()
	var page ledger.SessionPage
	var seqs []int64
	for rows.Next() {
		var se ledger.Session
		var seq, created, updated int64
		var head []byte
		if err := rows.Scan(&seq, &se.SessionID, &se.AgentID, &se.Writer, &se.Length, &head, &created, &updated); err != nil {
			return ledger.SessionPage{}, fmt.Errorf("couldn't list sessions: %w", err)
		}
		copy(se.Head[:], head)
		se.CreatedAt, se.UpdatedAt = time.UnixMicro(created).UTC(), time.UnixMicro(updated).UTC()
		page.Sessions = append(page.Sessions, se)
		seqs = append(seqs, seq)
	}
	if err := rows.Err(); err != nil {
		return ledger.SessionPage{}, fmt.Errorf("couldn't list sessions: %w", err)
	}
	if len(page.Sessions) > limit {
		page.Sessions = page.Sessions[:limit]
		page.Next = ledger.FormatCursor(seqs[limit-1])
	}
	return page, nil
}

// Entries implements ledger.Store.
func (s *Store) Entries(ctx context.Context, sessionID string, from int64, limit int) ([]ledger.Entry, error) {
	if from < 0 {
		return nil, fmt.Errorf("entries of session %q: negative start position %d", sessionID, from)
	}
	rows, err := s.read.QueryContext(ctx, q.Entries, sessionID, from, ledger.PageSize(limit))
	if err != nil {
		return nil, fmt.Errorf("couldn't read entries of session %q: %w", sessionID, err)
	}
	defer rows.Close()
	es := []ledger.Entry{}
	for rows.Next() {
		e := ledger.Entry{SessionID: sessionID}
		var rec int64
		var eh, ph []byte
		if err := rows.Scan(&e.Position, &e.EntryID, &e.StepID, &e.StepType, &e.Timestamp, &rec, &e.Content, &eh, &ph); err != nil {
			return nil, fmt.Errorf("couldn't read entries of session %q: %w", sessionID, err)
		}
		e.RecordedAt = time.UnixMicro(rec).UTC()
		copy(e.EntryHash[:], eh)
		e.PreviousHash = hashPtr(ph)
		es = append(es, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("couldn't read entries of session %q: %w", sessionID, err)
	}
	if len(es) == 0 {
		// Tell an unknown session from a position past the end.
		if _, err := s.Session(ctx, sessionID); err != nil {
			return nil, err
		}
	}
	return es, nil
}

// EntriesByStep implements ledger.Store.
func (s *Store) EntriesByStep(ctx context.Context, stepID, sessionID string) ([]ledger.Entry, error) {
	var rows *sql.Rows
	var err error
	if sessionID != "" {
		rows, err = s.read.QueryContext(ctx, q.EntryByStep, sessionID, stepID)
	} else {
		rows, err = s.read.QueryContext(ctx, q.EntriesByStep, stepID, ledger.MaxEntriesByStep)
	}
	if err != nil {
		return nil, fmt.Errorf("couldn't look up step %q: %w", stepID, err)
	}
	defer rows.Close()
	es := []ledger.Entry{}
	for rows.Next() {
		var e ledger.Entry
		var rec int64
		var eh, ph []byte
		if err := rows.Scan(&e.SessionID, &e.Position, &e.EntryID, &e.StepID, &e.StepType, &e.Timestamp, &rec, &e.Content, &eh, &ph); err != nil {
			return nil, fmt.Errorf("couldn't look up step %q: %w", stepID, err)
		}
		e.RecordedAt = time.UnixMicro(rec).UTC()
		copy(e.EntryHash[:], eh)
		e.PreviousHash = hashPtr(ph)
		es = append(es, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("couldn't look up step %q: %w", stepID, err)
	}
	return es, nil
}

// isUnique reports a unique-key violation: another writer stored the same
// session, position or step first.
func isUnique(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && (se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
}

func hashPtr(b []byte) *acs.Hash {
	if b == nil {
		return nil
	}
	var h acs.Hash
	copy(h[:], b)
	return &h
}

// DBs returns the store's writer (one connection) and reader handles, for
// tests and tools that read or write the tables directly (internal/tlogdb).
// The Merkle log's storage (LogStorage) uses them too, so its writes queue
// behind the store's on the single writer connection, as SQLite requires.
func (s *Store) DBs() (write, read *sql.DB) { return s.write, s.read }

// ownerOnly makes the database file readable and writable by its owner
// only (0600), creating it empty if it does not exist, and tightens the
// WAL and shared-memory files left by an earlier run. SQLite creates the
// -wal and -shm files with the mode of the database file, so they follow.
func ownerOnly(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("couldn't create %s: %w", path, err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("couldn't make %s readable by its owner only: %w", p, err)
		}
	}
	return nil
}

// toolName is ledger.ToolName as a column value: NULL when none.
func toolName(params []byte) any {
	if t := ledger.ToolName(params); t != "" {
		return t
	}
	return nil
}
