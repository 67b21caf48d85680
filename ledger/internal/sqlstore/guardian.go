package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/internal/plan"
)

// Response implements ledger.StepReader.
func (s *Store) Response(ctx context.Context, sessionID string, position int64) ([]byte, error) {
	var b []byte
	err := s.d.Reader().QueryRow(ctx, s.q.Response, sessionID, position).Scan(&b)
	if noRows(err) {
		return nil, fmt.Errorf("response for session %q position %d: %w", sessionID, position, ledger.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("couldn't read response for session %q position %d: %w", sessionID, position, err)
	}
	return b, nil
}

// Request implements ledger.StepReader.
func (s *Store) Request(ctx context.Context, sessionID string, position int64) ([]byte, error) {
	var b []byte
	err := s.d.Reader().QueryRow(ctx, s.q.RequestParams, sessionID, position).Scan(&b)
	if noRows(err) {
		// Rarely taken (a step without params, or erased ones), so the
		// erasure is read only then.
		e, err := s.readErasure(ctx, s.d.Reader(), sessionID, position)
		if err != nil {
			return nil, err
		}
		if e != nil {
			return nil, &ledger.ErasedError{Erasure: *e}
		}
		return nil, fmt.Errorf("request params for session %q position %d: %w", sessionID, position, ledger.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("couldn't read request params for session %q position %d: %w", sessionID, position, err)
	}
	if b == nil {
		b = []byte{} // SQLite reads an empty blob as NULL
	}
	return s.opts.OpenParams(sessionID, position, b)
}

// RecordRequest implements ledger.StepRecorder.
func (s *Store) RecordRequest(ctx context.Context, sessionID, requestID, nonce string, at time.Time) error {
	if err := plan.CheckRequest(sessionID, requestID, nonce); err != nil {
		return err
	}
	n, err := s.d.Writer().Exec(ctx, s.q.RecordRequest, sessionID, requestID, nonce, s.dl.Time(at))
	if err != nil {
		return fmt.Errorf("couldn't record request %q of session %q: %w", requestID, sessionID, err)
	}
	if n == 0 {
		return fmt.Errorf("request %q (nonce %q) of session %q: %w", requestID, nonce, sessionID, ledger.ErrReplay)
	}
	return nil
}

// PutPolicyBundle implements ledger.PolicyBundleStore.
func (s *Store) PutPolicyBundle(ctx context.Context, b ledger.PolicyBundle) error {
	if err := plan.CheckBundle(b); err != nil {
		return err
	}
	w := s.d.Writer()
	n, err := w.Exec(ctx, s.q.InsertBundle, b.ID, b.Version, b.Digest, b.Content, s.dl.Time(s.opts.Clock()()))
	if err != nil {
		return fmt.Errorf("couldn't store policy bundle %s@%s: %w", b.ID, b.Version, err)
	}
	if n == 1 {
		return nil
	}
	var have string
	if err := w.QueryRow(ctx, s.q.BundleDigest, b.ID, b.Version).Scan(&have); err != nil {
		return fmt.Errorf("couldn't read policy bundle %s@%s: %w", b.ID, b.Version, err)
	}
	if have != b.Digest {
		return fmt.Errorf("policy bundle %s@%s is stored with digest %s, not %s: %w", b.ID, b.Version, have, b.Digest, ledger.ErrConflict)
	}
	return nil
}

// PolicyBundle implements ledger.PolicyBundleStore.
func (s *Store) PolicyBundle(ctx context.Context, id, version string) (ledger.PolicyBundle, error) {
	var b ledger.PolicyBundle
	err := s.d.Reader().QueryRow(ctx, s.q.PolicyBundle, id, version).Scan(&b.ID, &b.Version, &b.Digest, &b.Content, s.dl.ScanTime(&b.RecordedAt))
	if noRows(err) {
		return ledger.PolicyBundle{}, fmt.Errorf("policy bundle %s@%s: %w", id, version, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.PolicyBundle{}, fmt.Errorf("couldn't read policy bundle %s@%s: %w", id, version, err)
	}
	b.RecordedAt = b.RecordedAt.UTC()
	return b, nil
}

// PolicyBundles implements ledger.PolicyBundleStore.
func (s *Store) PolicyBundles(ctx context.Context) ([]ledger.PolicyBundle, error) {
	return listRows(ctx, s, "couldn't list policy bundles", s.q.PolicyBundles, nil, func(r Rows, b *ledger.PolicyBundle) error {
		err := r.Scan(&b.ID, &b.Version, &b.Digest, s.dl.ScanTime(&b.RecordedAt))
		b.RecordedAt = b.RecordedAt.UTC()
		return err
	})
}

// EraseParams implements ledger.ParamsEraser. The driver prepares the
// transaction first (Driver.BeginErase: PostgreSQL acts as the eraser role
// there).
func (s *Store) EraseParams(ctx context.Context, sessionID string, position int64, reason, by string) (ledger.Erasure, error) {
	e := ledger.Erasure{SessionID: sessionID, Position: position, Payload: ledger.PayloadParams, ErasedAt: s.opts.Clock()().UTC(), Reason: reason, ErasedBy: by}
	if err := e.Check(); err != nil {
		return ledger.Erasure{}, err
	}
	err := s.erasePayload(ctx, &e, erasing{
		insert: s.q.InsertErasure, delete: s.q.DeleteRequestParams,
		what: "the params", rows: "params rows", notErasable: s.notErasable,
	})
	if err != nil {
		return ledger.Erasure{}, fmt.Errorf("couldn't erase the request params of session %q position %d: %w", sessionID, position, err)
	}
	e.ErasedAt = e.ErasedAt.UTC()
	return e, nil
}

// erasing names what erasePayload erases: the statement that records the
// erasure (returning the stored time, or no row when nothing is stored),
// the one that deletes the payload, how errors name them, and why nothing
// was erasable.
type erasing struct {
	insert, delete string
	what, rows     string
	notErasable    func(ctx context.Context, tx Querier, sessionID string, position int64) error
}

// erasePayload erases one payload beside an entry in one transaction that
// the driver prepares (Driver.BeginErase: PostgreSQL acts as the eraser
// role there): it refuses a held entry, records the erasure first, then
// deletes the payload. e.ErasedAt becomes the stored time.
func (s *Store) erasePayload(ctx context.Context, e *ledger.Erasure, k erasing) error {
	return s.d.InTx(ctx, func(tx Querier) error {
		if err := s.d.BeginErase(ctx, tx); err != nil {
			return err
		}
		if err := s.refuseHeld(ctx, tx, e.SessionID, e.Position); err != nil {
			return err
		}
		// The stored time comes back, as precise as the column keeps it.
		err := tx.QueryRow(ctx, k.insert, e.SessionID, e.Position, s.dl.Time(e.ErasedAt), e.Reason, e.ErasedBy).Scan(s.dl.ScanTime(&e.ErasedAt))
		if noRows(err) {
			return k.notErasable(ctx, tx, e.SessionID, e.Position)
		}
		if err != nil {
			return fmt.Errorf("couldn't record the erasure: %w", err)
		}
		n, err := tx.Exec(ctx, k.delete, e.SessionID, e.Position)
		if err != nil {
			return fmt.Errorf("couldn't delete %s: %w", k.what, err)
		}
		if n != 1 {
			return fmt.Errorf("deleted %d %s, want 1", n, k.rows)
		}
		return nil
	})
}

// notErasable explains why InsertErasure found nothing to erase: an
// *ledger.ErasedError if an erasure is recorded, else ErrNotFound.
func (s *Store) notErasable(ctx context.Context, tx Querier, sessionID string, position int64) error {
	e, err := s.readErasure(ctx, tx, sessionID, position)
	if err != nil {
		return err
	}
	if e == nil {
		return fmt.Errorf("no params are stored: %w", ledger.ErrNotFound)
	}
	return &ledger.ErasedError{Erasure: *e}
}

// readErasure returns the erasure recorded for a session's position, or nil.
func (s *Store) readErasure(ctx context.Context, db Querier, sessionID string, position int64) (*ledger.Erasure, error) {
	e := ledger.Erasure{SessionID: sessionID, Position: position, Payload: ledger.PayloadParams}
	err := db.QueryRow(ctx, s.q.Erasure, sessionID, position).Scan(s.dl.ScanTime(&e.ErasedAt), &e.Reason, &e.ErasedBy)
	if noRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("couldn't read the erasure of session %q position %d: %w", sessionID, position, err)
	}
	e.ErasedAt = e.ErasedAt.UTC()
	return &e, nil
}
