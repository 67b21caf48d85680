package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/internal/plan"
)

// errHeadMoved means another writer moved or created a head between our
// read and our compare-and-swap.
var errHeadMoved = errors.New("session head moved concurrently")

const maxAttempts = 20

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
	p, err := s.apply(ctx, ps, true)
	if err != nil {
		return nil, err
	}
	return p.Results, nil
}

// apply plans ps against the current state and writes the plan in one
// transaction, retrying from fresh state when a concurrent writer got in
// between. With allOrNothing, any per-record error aborts the whole write
// and is returned; otherwise records that fail are left out and their
// errors are in the returned plan.
func (s *Store) apply(ctx context.Context, ps []plan.Prepared, allOrNothing bool) (*plan.Plan, error) {
	for attempt := 1; ; attempt++ {
		var p *plan.Plan
		err := inTx(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			if p, err = s.plan(ctx, tx, ps); err != nil {
				return err
			}
			if allOrNothing {
				if err := p.Failed(); err != nil {
					return err
				}
			}
			if s.beforeWrite != nil {
				if err := s.beforeWrite(p); err != nil {
					return err
				}
			}
			return s.write(ctx, tx, p)
		})
		if err != nil && retryable(err) && attempt < maxAttempts {
			continue
		}
		if err != nil {
			return nil, err
		}
		s.commits.Add(1)
		return p, nil
	}
}

func (s *Store) plan(ctx context.Context, tx pgx.Tx, ps []plan.Prepared) (*plan.Plan, error) {
	ids := plan.SessionIDs(ps)
	states := make(map[string]plan.State, len(ids))
	rows, err := tx.Query(ctx, q["SessionStates"], ids)
	if err != nil {
		return nil, fmt.Errorf("couldn't read session heads: %w", err)
	}
	for rows.Next() {
		var id string
		var st plan.State
		var head []byte
		if err := rows.Scan(&id, &st.AgentID, &st.Length, &head); err != nil {
			rows.Close()
			return nil, fmt.Errorf("couldn't read session heads: %w", err)
		}
		copy(st.Head[:], head)
		states[id] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("couldn't read session heads: %w", err)
	}
	// Only existing sessions can hold a step already.
	var keySessions, keySteps []string
	for _, p := range ps {
		if _, ok := states[p.SessionID]; ok {
			keySessions = append(keySessions, p.SessionID)
			keySteps = append(keySteps, p.Entry.StepID)
		}
	}
	stored := make(map[plan.Key]plan.Stored)
	if len(keySessions) > 0 {
		rows, err := tx.Query(ctx, q["StoredBySteps"], keySessions, keySteps)
		if err != nil {
			return nil, fmt.Errorf("couldn't look up steps: %w", err)
		}
		for rows.Next() {
			var k plan.Key
			var old plan.Stored
			var eh, ph []byte
			if err := rows.Scan(&k.SessionID, &k.StepID, &old.Position, &eh, &ph, &old.Content); err != nil {
				rows.Close()
				return nil, fmt.Errorf("couldn't look up steps: %w", err)
			}
			copy(old.EntryHash[:], eh)
			old.PreviousHash = hashPtr(ph)
			stored[k] = old
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("couldn't look up steps: %w", err)
		}
	}
	return plan.Make(ps, states, stored), nil
}

// write inserts a plan's new sessions and entries and moves its heads, one
// statement each.
func (s *Store) write(ctx context.Context, tx pgx.Tx, p *plan.Plan) error {
	if len(p.Rows) == 0 {
		return nil
	}
	now := s.opts.Clock()()
	var newIDs, newAgents, headIDs []string
	var newLens []int64
	var newHeads [][]byte
	var mvIDs []string
	var mvFromLen, mvToLen []int64
	var mvFrom, mvTo [][]byte
	for _, m := range p.Moves {
		if m.Created {
			newIDs = append(newIDs, m.SessionID)
			newAgents = append(newAgents, m.AgentID)
			headIDs = append(headIDs, m.SessionID)
			newLens = append(newLens, m.ToLength)
			newHeads = append(newHeads, m.ToHead[:])
			continue
		}
		mvIDs = append(mvIDs, m.SessionID)
		mvFromLen = append(mvFromLen, m.FromLength)
		mvFrom = append(mvFrom, m.FromHead[:])
		mvToLen = append(mvToLen, m.ToLength)
		mvTo = append(mvTo, m.ToHead[:])
	}
	if len(newIDs) > 0 {
		tag, err := tx.Exec(ctx, q["InsertSessions"], newIDs, newAgents, now)
		if err != nil {
			return fmt.Errorf("couldn't create sessions: %w", err)
		}
		if tag.RowsAffected() != int64(len(newIDs)) {
			return errHeadMoved
		}
	}
	n := len(p.Rows)
	sessionIDs, entryIDs, stepIDs, stepTypes, stamps := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	positions := make([]int64, n)
	hashes, prevs, contents := make([][]byte, n), make([][]byte, n), make([][]byte, n)
	for i, r := range p.Rows {
		sessionIDs[i], positions[i], hashes[i] = r.SessionID, r.Position, r.EntryHash[:]
		if r.PreviousHash != nil {
			prevs[i] = r.PreviousHash[:]
		}
		e := r.Entry
		entryIDs[i], stepIDs[i], stepTypes[i], stamps[i], contents[i] = e.EntryID, e.StepID, e.StepType, e.Timestamp, e.Content
	}
	if _, err := tx.Exec(ctx, q["InsertEntries"], sessionIDs, positions, hashes, prevs, entryIDs, stepIDs, stepTypes, stamps, contents, now); err != nil {
		return fmt.Errorf("couldn't insert entries: %w", err)
	}
	if len(headIDs) > 0 {
		if _, err := tx.Exec(ctx, q["InsertHeads"], headIDs, newLens, newHeads, now); err != nil {
			return fmt.Errorf("couldn't create heads: %w", err)
		}
	}
	if len(mvIDs) > 0 {
		tag, err := tx.Exec(ctx, q["MoveHeads"], mvIDs, mvFromLen, mvFrom, mvToLen, mvTo, now)
		if err != nil {
			return fmt.Errorf("couldn't move heads: %w", err)
		}
		if tag.RowsAffected() != int64(len(mvIDs)) {
			return errHeadMoved
		}
	}
	return nil
}

func hashPtr(b []byte) *acs.Hash {
	if b == nil {
		return nil
	}
	var h acs.Hash
	copy(h[:], b)
	return &h
}
