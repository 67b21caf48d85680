package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/ledger"
)

// Session implements ledger.Store.
func (s *Store) Session(ctx context.Context, sessionID string) (ledger.Session, error) {
	var se ledger.Session
	var head []byte
	err := s.pool.QueryRow(ctx, q.Session, sessionID).Scan(
		&se.SessionID, &se.AgentID, &se.Writer, &se.Length, &head, &se.CreatedAt, &se.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.Session{}, fmt.Errorf("session %q: %w", sessionID, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Session{}, fmt.Errorf("couldn't read session %q: %w", sessionID, err)
	}
	copy(se.Head[:], head)
	se.CreatedAt, se.UpdatedAt = se.CreatedAt.UTC(), se.UpdatedAt.UTC()
	return se, nil
}

// Sessions implements ledger.Store.
func (s *Store) Sessions(ctx context.Context, f ledger.SessionFilter) (ledger.SessionPage, error) {
	after, err := ledger.ParseCursor(f.Cursor)
	if err != nil {
		return ledger.SessionPage{}, err
	}
	limit := ledger.PageSize(f.Limit)
	optTime := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	rows, err := s.pool.Query(ctx, q.Sessions, after, f.AgentID, optTime(f.Since), optTime(f.Until), f.StepType, limit+1)
	if err != nil {
		return ledger.SessionPage{}, fmt.Errorf("couldn't list sessions: %w", err)
	}
	defer rows.Close()
	var page ledger.SessionPage
	var seqs []int64
	for rows.Next() {
		var se ledger.Session
		var seq int64
		var head []byte
		if err := rows.Scan(&seq, &se.SessionID, &se.AgentID, &se.Writer, &se.Length, &head, &se.CreatedAt, &se.UpdatedAt); err != nil {
			return ledger.SessionPage{}, fmt.Errorf("couldn't list sessions: %w", err)
		}
		copy(se.Head[:], head)
		se.CreatedAt, se.UpdatedAt = se.CreatedAt.UTC(), se.UpdatedAt.UTC()
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
	rows, err := s.pool.Query(ctx, q.Entries, sessionID, from, ledger.PageSize(limit))
	if err != nil {
		return nil, fmt.Errorf("couldn't read entries of session %q: %w", sessionID, err)
	}
	defer rows.Close()
	es := []ledger.Entry{}
	for rows.Next() {
		e := ledger.Entry{SessionID: sessionID}
		var eh, ph []byte
		if err := rows.Scan(&e.Position, &e.EntryID, &e.StepID, &e.StepType, &e.Timestamp, &e.RecordedAt, &e.Content, &eh, &ph); err != nil {
			return nil, fmt.Errorf("couldn't read entries of session %q: %w", sessionID, err)
		}
		e.RecordedAt = e.RecordedAt.UTC()
		copy(e.EntryHash[:], eh)
		e.PreviousHash = hashPtr(ph)
		es = append(es, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("couldn't read entries of session %q: %w", sessionID, err)
	}
	if len(es) == 0 {
		if _, err := s.Session(ctx, sessionID); err != nil {
			return nil, err
		}
	}
	return es, nil
}

// EntriesByStep implements ledger.Store.
func (s *Store) EntriesByStep(ctx context.Context, stepID, sessionID string) ([]ledger.Entry, error) {
	var rows pgx.Rows
	var err error
	if sessionID != "" {
		rows, err = s.pool.Query(ctx, q.EntryByStep, sessionID, stepID)
	} else {
		rows, err = s.pool.Query(ctx, q.EntriesByStep, stepID, ledger.MaxEntriesByStep)
	}
	if err != nil {
		return nil, fmt.Errorf("couldn't look up step %q: %w", stepID, err)
	}
	defer rows.Close()
	es := []ledger.Entry{}
	for rows.Next() {
		var e ledger.Entry
		var eh, ph []byte
		if err := rows.Scan(&e.SessionID, &e.Position, &e.EntryID, &e.StepID, &e.StepType, &e.Timestamp, &e.RecordedAt, &e.Content, &eh, &ph); err != nil {
			return nil, fmt.Errorf("couldn't look up step %q: %w", stepID, err)
		}
		e.RecordedAt = e.RecordedAt.UTC()
		copy(e.EntryHash[:], eh)
		e.PreviousHash = hashPtr(ph)
		es = append(es, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("couldn't look up step %q: %w", stepID, err)
	}
	return es, nil
}
