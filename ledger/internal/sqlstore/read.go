package sqlstore

import (
	"context"
	"fmt"

	"github.com/acsledger/acsledger/ledger"
)

// Session implements ledger.Store.
func (s *Store) Session(ctx context.Context, sessionID string) (ledger.Session, error) {
	var se ledger.Session
	var head []byte
	err := s.d.Reader().QueryRow(ctx, s.q.Session, sessionID).Scan(
		&se.SessionID, &se.AgentID, &se.Writer, &se.Length, &head, s.dl.ScanTime(&se.CreatedAt), s.dl.ScanTime(&se.UpdatedAt))
	if noRows(err) {
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
	rows, err := s.d.Reader().Query(ctx, s.q.Sessions, after, f.AgentID, s.optTime(f.Since), s.optTime(f.Until), f.StepType, limit+1)
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
		if err := rows.Scan(&seq, &se.SessionID, &se.AgentID, &se.Writer, &se.Length, &head, s.dl.ScanTime(&se.CreatedAt), s.dl.ScanTime(&se.UpdatedAt)); err != nil {
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
	page.Sessions, page.Next = trimPage(page.Sessions, limit, func(i int) string { return ledger.FormatCursor(seqs[i]) })
	return page, nil
}

// Entries implements ledger.Store.
func (s *Store) Entries(ctx context.Context, sessionID string, from int64, limit int) ([]ledger.Entry, error) {
	if from < 0 {
		return nil, fmt.Errorf("entries of session %q: negative start position %d", sessionID, from)
	}
	rows, err := s.d.Reader().Query(ctx, s.q.Entries, sessionID, from, ledger.PageSize(limit))
	if err != nil {
		return nil, fmt.Errorf("couldn't read entries of session %q: %w", sessionID, err)
	}
	es, err := s.scanEntries(rows, sessionID)
	if err != nil {
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
	var rows Rows
	var err error
	if sessionID != "" {
		rows, err = s.d.Reader().Query(ctx, s.q.EntryByStep, sessionID, stepID)
	} else {
		rows, err = s.d.Reader().Query(ctx, s.q.EntriesByStep, stepID, ledger.MaxEntriesByStep)
	}
	if err != nil {
		return nil, fmt.Errorf("couldn't look up step %q: %w", stepID, err)
	}
	es, err := s.scanEntries(rows, "")
	if err != nil {
		return nil, fmt.Errorf("couldn't look up step %q: %w", stepID, err)
	}
	return es, nil
}

// scanEntries reads and closes rows of entries: those of the session
// sessionID (Entries), or, with sessionID empty, rows that start with
// their session_id (EntriesByStep, EntryByStep).
func (s *Store) scanEntries(rows Rows, sessionID string) ([]ledger.Entry, error) {
	defer rows.Close()
	es := []ledger.Entry{}
	for rows.Next() {
		e := ledger.Entry{SessionID: sessionID}
		var eh, ph []byte
		dest := []any{&e.Position, &e.EntryID, &e.StepID, &e.StepType, &e.Timestamp, s.dl.ScanTime(&e.RecordedAt), &e.Content, &eh, &ph}
		if sessionID == "" {
			dest = append([]any{&e.SessionID}, dest...)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		e.RecordedAt = e.RecordedAt.UTC()
		copy(e.EntryHash[:], eh)
		e.PreviousHash = HashPtr(ph)
		es = append(es, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return es, nil
}
