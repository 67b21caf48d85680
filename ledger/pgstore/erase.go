package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/ledger"
)

// EraserRole is the role EraseParams acts as, in its transaction only. The
// writer role the store otherwise acts as may not erase; the connecting
// role must be a member of both (migration 0005 makes the owner one).
const EraserRole = "acsledger_eraser"

// EraseParams implements ledger.GuardianStore. It runs as EraserRole (SET
// LOCAL ROLE), so it fails with a permission error when the URL's role is
// only the service's.
func (s *Store) EraseParams(ctx context.Context, sessionID string, position int64, reason, by string) (ledger.Erasure, error) {
	e := ledger.Erasure{SessionID: sessionID, Position: position, ErasedAt: s.opts.Clock()().UTC(), Reason: reason, ErasedBy: by}
	if err := e.Check(); err != nil {
		return ledger.Erasure{}, err
	}
	err := inTx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+EraserRole); err != nil {
			return fmt.Errorf("couldn't SET ROLE %s (erasing needs a role that is a member of it, such as the owner that ran migrate): %w", EraserRole, err)
		}
		err := tx.QueryRow(ctx, q.InsertErasure, sessionID, position, e.ErasedAt, reason, by).Scan(&e.ErasedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return notErasable(ctx, tx, sessionID, position)
		}
		if err != nil {
			return fmt.Errorf("couldn't record the erasure: %w", err)
		}
		tag, err := tx.Exec(ctx, q.DeleteRequestParams, sessionID, position)
		if err != nil {
			return fmt.Errorf("couldn't delete the params: %w", err)
		}
		if n := tag.RowsAffected(); n != 1 {
			return fmt.Errorf("deleted %d params rows, want 1", n)
		}
		return nil
	})
	if err != nil {
		return ledger.Erasure{}, fmt.Errorf("couldn't erase the request params of session %q position %d: %w", sessionID, position, err)
	}
	e.ErasedAt = e.ErasedAt.UTC()
	return e, nil
}

// notErasable explains why InsertErasure found nothing to erase: an
// *ledger.ErasedError if an erasure is recorded, else ErrNotFound.
func notErasable(ctx context.Context, tx pgx.Tx, sessionID string, position int64) error {
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
	QueryRow(context.Context, string, ...any) pgx.Row
}, sessionID string, position int64) (*ledger.Erasure, error) {
	e := ledger.Erasure{SessionID: sessionID, Position: position}
	var at time.Time
	err := db.QueryRow(ctx, q.Erasure, sessionID, position).Scan(&at, &e.Reason, &e.ErasedBy)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("couldn't read the erasure of session %q position %d: %w", sessionID, position, err)
	}
	e.ErasedAt = at.UTC()
	return &e, nil
}
