package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/acsledger/acsledger/ledger"
)

// EraseParams implements ledger.GuardianStore.
func (s *Store) EraseParams(ctx context.Context, sessionID string, position int64, reason, by string) (ledger.Erasure, error) {
	// Stored as Unix microseconds: return what a later read gives back.
	at := s.opts.Clock()().UTC().Truncate(time.Microsecond)
	e := ledger.Erasure{SessionID: sessionID, Position: position, ErasedAt: at, Reason: reason, ErasedBy: by}
	if err := e.Check(); err != nil {
		return ledger.Erasure{}, err
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, q.InsertErasure, sessionID, position, at.UnixMicro(), reason, by)
		if err != nil {
			return fmt.Errorf("couldn't record the erasure: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return notErasable(ctx, tx, sessionID, position)
		}
		res, err = tx.ExecContext(ctx, q.DeleteRequestParams, sessionID, position)
		if err != nil {
			return fmt.Errorf("couldn't delete the params: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			return fmt.Errorf("deleted %d params rows, want 1", n)
		}
		return nil
	})
	if err != nil {
		return ledger.Erasure{}, fmt.Errorf("couldn't erase the request params of session %q position %d: %w", sessionID, position, err)
	}
	return e, nil
}

// notErasable explains why InsertErasure inserted nothing: an
// *ledger.ErasedError if an erasure is recorded, else ErrNotFound.
func notErasable(ctx context.Context, tx *sql.Tx, sessionID string, position int64) error {
	e, err := readErasure(ctx, tx, sessionID, position)
	if err != nil {
		return err
	}
	if e == nil {
		return fmt.Errorf("no params are stored: %w", ledger.ErrNotFound)
	}
	return &ledger.ErasedError{Erasure: *e}
}

// readErasure returns the erasure recorded for a session's position, or nil.
func readErasure(ctx context.Context, db interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, sessionID string, position int64) (*ledger.Erasure, error) {
	e := ledger.Erasure{SessionID: sessionID, Position: position}
	var at int64
	err := db.QueryRowContext(ctx, q.Erasure, sessionID, position).Scan(&at, &e.Reason, &e.ErasedBy)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("couldn't read the erasure of session %q position %d: %w", sessionID, position, err)
	}
	e.ErasedAt = time.UnixMicro(at).UTC()
	return &e, nil
}
