package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/acsledger/acsledger/ledger"
)

// payloadKind is how the store erases one kind of payload in a batch
// (ledger.PayloadKinds names them): the page of keys, the statement that
// records the erasures of the page's rows in scope, and the delete of the
// rows the run recorded in the page. Adding a kind is one row here and one there.
// byFormat: the erase statement takes the scope's source format as its
// eighth argument (a kind of several formats).
type payloadKind struct {
	keys, erase, del func(q *Queries) string
	byFormat         bool
}

var payloadKinds = map[string]payloadKind{
	"params": {
		keys:  func(q *Queries) string { return q.ParamsKeys },
		erase: func(q *Queries) string { return q.EraseParamsBatch },
		del:   func(q *Queries) string { return q.DeleteErasedParams },
	},
	"source": {
		keys:     func(q *Queries) string { return q.SourceKeys },
		erase:    func(q *Queries) string { return q.EraseSourceBatch },
		del:      func(q *Queries) string { return q.DeleteErasedSource },
		byFormat: true,
	},
}

// PutRule implements ledger.RetentionAdmin.
func (s *Store) PutRule(ctx context.Context, r ledger.Rule) (ledger.Rule, error) {
	if err := r.Check(); err != nil {
		return ledger.Rule{}, err
	}
	r.SetAt = s.opts.Clock()().UTC()
	_, err := s.d.Writer().Exec(ctx, s.q.PutRule, r.Name, r.AgentPrefix, r.SourceFormat, r.StepType,
		int64(r.Period/time.Second), r.Reason, r.SetBy, s.dl.Time(r.SetAt))
	if err != nil {
		return ledger.Rule{}, fmt.Errorf("couldn't store retention rule %q: %w", r.Name, err)
	}
	return r, nil
}

func (s *Store) scanRule(r Row, out *ledger.Rule) error {
	var secs int64
	if err := r.Scan(&out.Name, &out.AgentPrefix, &out.SourceFormat, &out.StepType, &secs, &out.Reason, &out.SetBy, s.dl.ScanTime(&out.SetAt)); err != nil {
		return err
	}
	out.Period = time.Duration(secs) * time.Second
	out.SetAt = out.SetAt.UTC()
	return nil
}

// DeleteRule implements ledger.RetentionAdmin.
func (s *Store) DeleteRule(ctx context.Context, name string) (ledger.Rule, error) {
	var r ledger.Rule
	err := s.scanRule(s.d.Writer().QueryRow(ctx, s.q.DeleteRule, name), &r)
	if noRows(err) {
		return ledger.Rule{}, fmt.Errorf("retention rule %q: %w", name, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Rule{}, fmt.Errorf("couldn't delete retention rule %q: %w", name, err)
	}
	return r, nil
}

// Rules implements ledger.RetentionAdmin.
func (s *Store) Rules(ctx context.Context) ([]ledger.Rule, error) {
	return listRows(ctx, s, "couldn't list retention rules", s.q.Rules, nil, func(r Rows, out *ledger.Rule) error {
		return s.scanRule(r, out)
	})
}

// PutHold implements ledger.RetentionAdmin: the hold and its sessions in
// one transaction.
func (s *Store) PutHold(ctx context.Context, h ledger.Hold) (ledger.Hold, error) {
	if err := h.Check(); err != nil {
		return ledger.Hold{}, err
	}
	h.SetAt = s.opts.Clock()().UTC()
	h.ReleasedAt, h.ReleasedBy, h.ReleaseReason = time.Time{}, "", ""
	err := s.d.InTx(ctx, func(tx Querier) error {
		err := tx.QueryRow(ctx, s.q.InsertHold, h.Case, h.AgentPrefix, s.optTime(h.From), s.optTime(h.Until),
			len(h.Sessions), h.Reason, h.SetBy, s.dl.Time(h.SetAt)).Scan(&h.ID)
		if err != nil {
			if s.dl.IsUnique(err) {
				return fmt.Errorf("case %q already has a standing hold: %w", h.Case, ledger.ErrConflict)
			}
			return err
		}
		for _, id := range h.Sessions {
			if _, err := tx.Exec(ctx, s.q.InsertHoldSession, h.ID, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return ledger.Hold{}, fmt.Errorf("couldn't set the hold of case %q: %w", h.Case, err)
	}
	return h, nil
}

// ReleaseHold implements ledger.RetentionAdmin.
func (s *Store) ReleaseHold(ctx context.Context, caseName, by, reason string) (ledger.Hold, error) {
	if err := (ledger.Hold{Case: caseName, Reason: reason, AgentPrefix: "-"}).Check(); err != nil {
		return ledger.Hold{}, err
	}
	var id int64
	err := s.d.Writer().QueryRow(ctx, s.q.ReleaseHold, caseName, s.dl.Time(s.opts.Clock()().UTC()), by, reason).Scan(&id)
	if noRows(err) {
		return ledger.Hold{}, fmt.Errorf("no standing hold of case %q: %w", caseName, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Hold{}, fmt.Errorf("couldn't release the hold of case %q: %w", caseName, err)
	}
	var h ledger.Hold
	if err := s.scanHold(s.d.Writer().QueryRow(ctx, s.q.HoldByID, id), &h); err != nil {
		return ledger.Hold{}, fmt.Errorf("couldn't read the released hold of case %q: %w", caseName, err)
	}
	if h.Sessions, err = s.holdSessions(ctx, id); err != nil {
		return ledger.Hold{}, err
	}
	return h, nil
}

func (s *Store) scanHold(r Row, h *ledger.Hold) error {
	err := r.Scan(&h.ID, &h.Case, &h.AgentPrefix, NullTime{T: &h.From}, NullTime{T: &h.Until}, &h.Reason, &h.SetBy,
		s.dl.ScanTime(&h.SetAt), NullTime{T: &h.ReleasedAt}, &h.ReleasedBy, &h.ReleaseReason)
	h.SetAt = h.SetAt.UTC()
	return err
}

func (s *Store) holdSessions(ctx context.Context, id int64) ([]string, error) {
	return listRows(ctx, s, "couldn't list a hold's sessions", s.q.HoldSessions, []any{id}, func(r Rows, out *string) error {
		return r.Scan(out)
	})
}

// Holds implements ledger.RetentionAdmin.
func (s *Store) Holds(ctx context.Context, all bool) ([]ledger.Hold, error) {
	flag := 0
	if all {
		flag = 1
	}
	hs, err := listRows(ctx, s, "couldn't list holds", s.q.Holds, []any{flag}, func(r Rows, h *ledger.Hold) error {
		return s.scanHold(r, h)
	})
	if err != nil {
		return nil, err
	}
	for i := range hs {
		if hs[i].Sessions, err = s.holdSessions(ctx, hs[i].ID); err != nil {
			return nil, err
		}
	}
	return hs, nil
}

// heldBy returns the case of a standing hold covering a session's entry at
// position, or "".
func (s *Store) heldBy(ctx context.Context, tx Querier, sessionID string, position int64) (string, error) {
	var c string
	err := tx.QueryRow(ctx, s.q.HeldBy, sessionID, position).Scan(&c)
	if noRows(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("couldn't check the legal holds: %w", err)
	}
	return c, nil
}

// refuseHeld returns a *ledger.HeldError naming the case of a standing
// hold covering the entry at position: an erasure by hand (EraseParams,
// EraseSource) is refused under a hold.
func (s *Store) refuseHeld(ctx context.Context, tx Querier, sessionID string, position int64) error {
	held, err := s.heldBy(ctx, tx, sessionID, position)
	if err != nil {
		return err
	}
	if held != "" {
		return &ledger.HeldError{Case: held, SessionID: sessionID, Position: position}
	}
	return nil
}

// scanCursors reads rows of (session_id, position) and closes them.
func scanCursors(rows Rows) ([]ledger.Cursor, error) {
	var out []ledger.Cursor
	for rows.Next() {
		var c ledger.Cursor
		if err := rows.Scan(&c.SessionID, &c.Position); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, c)
	}
	rows.Close()
	return out, rows.Err()
}

// EraseBatch implements ledger.PayloadSweeper. The transaction reads one
// page of keys (at most limit), records the erasures of those in scope
// and under no hold, and deletes them: its work is bounded by limit.
func (s *Store) EraseBatch(ctx context.Context, kind string, sc ledger.PayloadScope, from ledger.Cursor, limit int, runID, reason, by string) (ledger.Batch, error) {
	k, ok := payloadKinds[kind]
	if !ok {
		return ledger.Batch{}, fmt.Errorf("unknown payload kind %q", kind)
	}
	if limit <= 0 {
		return ledger.Batch{}, fmt.Errorf("batch limit %d: must be positive", limit)
	}
	if err := (ledger.Erasure{SessionID: "-", Reason: reason, ErasedBy: by}).Check(); err != nil {
		return ledger.Batch{}, err
	}
	at := s.opts.Clock()().UTC()
	var b ledger.Batch
	err := s.d.InTx(ctx, func(tx Querier) error {
		b = ledger.Batch{Next: from}
		if err := s.d.BeginErase(ctx, tx); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, k.keys(s.q), from.SessionID, from.Position, limit)
		if err != nil {
			return fmt.Errorf("couldn't read the page of payloads: %w", err)
		}
		page, err := scanCursors(rows)
		if err != nil {
			return err
		}
		b.Done = len(page) < limit
		if len(page) == 0 {
			return nil
		}
		b.Next = page[len(page)-1]
		args := []any{s.dl.Time(at), reason, by, runID, s.dl.Time(sc.Before), sc.AgentPrefix, sc.StepType}
		if k.byFormat {
			args = append(args, sc.SourceFormat)
		}
		query, args := s.withKeys(k.erase(s.q), page, args...)
		rows, err = tx.Query(ctx, query, args...)
		if err != nil {
			return fmt.Errorf("couldn't record the erasures: %w", err)
		}
		keys, err := scanCursors(rows)
		if err != nil {
			return fmt.Errorf("couldn't record the erasures: %w", err)
		}
		for _, c := range keys {
			if _, err := tx.Exec(ctx, k.del(s.q), c.SessionID, c.Position); err != nil {
				return fmt.Errorf("couldn't delete the payload of session %q position %d: %w", c.SessionID, c.Position, err)
			}
		}
		b.Erased = summarise(keys)
		return nil
	})
	if err != nil {
		return ledger.Batch{}, fmt.Errorf("couldn't erase a batch of %s: %w", kind, err)
	}
	return b, nil
}

// withKeys puts the page's keys in place of query's keys marker, as
// placeholders numbered after args, and returns the query and all its
// arguments.
func (s *Store) withKeys(query string, page []ledger.Cursor, args ...any) (string, []any) {
	var list strings.Builder
	for i, c := range page {
		if i > 0 {
			list.WriteString(", ")
		}
		n := len(args) + 1
		fmt.Fprintf(&list, "(CAST(%s AS TEXT), CAST(%s AS BIGINT))", s.dl.Param(n), s.dl.Param(n+1))
		args = append(args, c.SessionID, c.Position)
	}
	return strings.Replace(query, "/*keys*/", list.String(), 1), args
}

// summarise groups erased keys by session (the keys come in any order).
func summarise(keys []ledger.Cursor) []ledger.ErasedRange {
	idx := map[string]int{}
	var out []ledger.ErasedRange
	for _, c := range keys {
		i, ok := idx[c.SessionID]
		if !ok {
			idx[c.SessionID] = len(out)
			out = append(out, ledger.ErasedRange{SessionID: c.SessionID, Count: 1, First: c.Position, Last: c.Position})
			continue
		}
		r := &out[i]
		r.Count++
		r.First, r.Last = min(r.First, c.Position), max(r.Last, c.Position)
	}
	return out
}

// CanErase implements ledger.PayloadSweeper: a transaction that only
// prepares to erase (Driver.BeginErase: on PostgreSQL, SET LOCAL ROLE to
// the eraser role) and writes nothing.
func (s *Store) CanErase(ctx context.Context) error {
	return s.d.InTx(ctx, func(tx Querier) error { return s.d.BeginErase(ctx, tx) })
}

// StartRun implements ledger.PayloadSweeper.
func (s *Store) StartRun(ctx context.Context, r ledger.Run) error {
	if _, err := s.d.Writer().Exec(ctx, s.q.StartRun, r.ID, r.Kind, r.Scope, s.dl.Time(r.StartedAt)); err != nil {
		return fmt.Errorf("couldn't record the start of run %s: %w", r.ID, err)
	}
	return nil
}

// FinishRun implements ledger.PayloadSweeper.
func (s *Store) FinishRun(ctx context.Context, id string, erased int64) error {
	n, err := s.d.Writer().Exec(ctx, s.q.FinishRun, id, s.dl.Time(s.opts.Clock()().UTC()), erased)
	if err != nil {
		return fmt.Errorf("couldn't record the end of run %s: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("run %s is finished already or unknown: %w", id, ledger.ErrNotFound)
	}
	return nil
}

// UnfinishedRuns implements ledger.PayloadSweeper.
func (s *Store) UnfinishedRuns(ctx context.Context) ([]ledger.Run, error) {
	return listRows(ctx, s, "couldn't list unfinished runs", s.q.UnfinishedRuns, nil, func(r Rows, out *ledger.Run) error {
		err := r.Scan(&out.ID, &out.Kind, &out.Scope, s.dl.ScanTime(&out.StartedAt))
		out.StartedAt = out.StartedAt.UTC()
		return err
	})
}

// RunErasures implements ledger.PayloadSweeper.
func (s *Store) RunErasures(ctx context.Context, id string) ([]ledger.ErasedRange, error) {
	return listRows(ctx, s, "couldn't summarise run "+id, s.q.RunErasures, []any{id}, func(r Rows, out *ledger.ErasedRange) error {
		out.SessionID = ""
		return r.Scan(&out.SessionID, &out.Count, &out.First, &out.Last)
	})
}

// RetentionStatus implements the dashboard's read: the counts, and each
// rule's next expiry (when the oldest payload in its scope expires).
func (s *Store) RetentionStatus(ctx context.Context) (ledger.RetentionStatus, error) {
	var st ledger.RetentionStatus
	err := s.d.Reader().QueryRow(ctx, s.q.RetentionTotals).Scan(&st.ErasedBySweeps, &st.ErasedByRequests, NullTime{T: &st.LastSweep}, &st.StandingHolds)
	if err != nil {
		return st, fmt.Errorf("couldn't read the retention counts: %w", err)
	}
	rules, err := s.Rules(ctx)
	if err != nil {
		return st, err
	}
	for _, r := range rules {
		rs := ledger.RuleStatus{Rule: r}
		var first time.Time
		for _, k := range ledger.PayloadKinds {
			if !k.HasFormat(r.SourceFormat) {
				continue
			}
			q, args := s.q.OldestPayload, []any{r.AgentPrefix, r.StepType}
			if k.Name == "source" {
				q, args = s.q.OldestSource, append(args, r.SourceFormat)
			}
			var oldest time.Time
			err := s.d.Reader().QueryRow(ctx, q, args...).Scan(s.dl.ScanTime(&oldest))
			switch {
			case noRows(err):
			case err != nil:
				return st, fmt.Errorf("couldn't read the oldest %s payload of rule %q: %w", k.Name, r.Name, err)
			case first.IsZero() || oldest.Before(first):
				first = oldest
			}
		}
		if !first.IsZero() {
			rs.NextExpiry = first.UTC().Add(r.Period)
		}
		st.Rules = append(st.Rules, rs)
	}
	return st, nil
}
