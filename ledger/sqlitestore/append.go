package sqlitestore

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/internal/plan"
	"github.com/acsledger/acsledger/ledger/internal/sqlq"
	"github.com/acsledger/acsledger/ledger/internal/sqlstore"
)

// The write path of appends: plan against the stored heads and write the
// plan, one statement per row on the one write connection.

//go:embed queries.sql
var queriesSQL string

// writeQueries are the named queries of queries.sql, the write path's, one
// field each (sqlq.Load): a misspelt query name stops the package at
// initialisation, before any test or server runs.
type writeQueries struct {
	SessionState, StoredByStep, InsertSession, InsertHead, MoveHead,
	InsertEntry, InsertResponse, InsertRequestParams,
	LogInsertLeaves, LogDequeue, LogInsertSessionTiles, LogInsertTile,
	IngestedReplayKey, InsertIngestRecord, InsertIngestFlag, InsertQuarantine, InsertSource string
}

// q are the store's queries: ledger/internal/sqlstore's, worded for SQLite
// (dialect{}, dialect.sql), and the write path's.
var q = struct {
	*sqlstore.Queries
	writeQueries
}{sqlstore.LoadQueries(dialect{}, dialectSQL), sqlq.Load[writeQueries](queriesSQL)}

// apply plans ps and writes the plan in one transaction. With
// allOrNothing, any per-record error aborts the write and is returned;
// otherwise failing records are left out and their errors are in the plan.
func (s *Store) apply(ctx context.Context, ps []plan.Prepared, allOrNothing bool) (*plan.Plan, error) {
	var p *plan.Plan
	err := s.inTxRetry(ctx, func(tx *sql.Tx) error {
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
	if err != nil {
		return nil, err
	}
	return p, nil
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
		old.PreviousHash = sqlstore.HashPtr(ph)
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
				return sqlstore.ErrHeadMoved
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
				return sqlstore.ErrHeadMoved
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
			return sqlstore.ErrHeadMoved
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
