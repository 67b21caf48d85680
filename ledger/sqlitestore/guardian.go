package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/internal/plan"
)

var _ ledger.GuardianStore = (*Store)(nil)

// AppendRequest implements ledger.GuardianStore. The replay key is
// inserted in the group's transaction, before the entries are planned.
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

// claim inserts the replay keys of ps in tx and returns the records whose
// key the session had already seen.
func claim(ctx context.Context, tx *sql.Tx, ps []plan.Prepared) (map[int]error, error) {
	var refused map[int]error
	for i, p := range ps {
		if p.Seen == nil {
			continue
		}
		res, err := tx.ExecContext(ctx, q.RecordRequest, p.SessionID, p.Seen.RequestID, p.Seen.Nonce, p.Seen.At.UnixMicro())
		if err != nil {
			return nil, fmt.Errorf("couldn't record request %q of session %q: %w", p.Seen.RequestID, p.SessionID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, err
		} else if n == 0 {
			if refused == nil {
				refused = make(map[int]error)
			}
			refused[i] = plan.ReplayError(p.SessionID, *p.Seen)
		}
	}
	return refused, nil
}

// Response implements ledger.GuardianStore.
func (s *Store) Response(ctx context.Context, sessionID string, position int64) ([]byte, error) {
	var b []byte
	err := s.read.QueryRowContext(ctx, q.Response, sessionID, position).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("response for session %q position %d: %w", sessionID, position, ledger.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("couldn't read response for session %q position %d: %w", sessionID, position, err)
	}
	return b, nil
}

// Request implements ledger.GuardianStore.
func (s *Store) Request(ctx context.Context, sessionID string, position int64) ([]byte, error) {
	var b []byte
	err := s.read.QueryRowContext(ctx, q.RequestParams, sessionID, position).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		// Rarely taken (a step without params, or erased ones), so the
		// erasure is read only then.
		e, err := readErasure(ctx, s.read, sessionID, position)
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
		b = []byte{}
	}
	return s.opts.OpenParams(sessionID, position, b)
}

// RecordRequest implements ledger.GuardianStore.
func (s *Store) RecordRequest(ctx context.Context, sessionID, requestID, nonce string, at time.Time) error {
	if err := plan.CheckRequest(sessionID, requestID, nonce); err != nil {
		return err
	}
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, q.RecordRequest, sessionID, requestID, nonce, at.UnixMicro())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("couldn't record request %q of session %q: %w", requestID, sessionID, err)
	}
	if n == 0 {
		return fmt.Errorf("request %q (nonce %q) of session %q: %w", requestID, nonce, sessionID, ledger.ErrReplay)
	}
	return nil
}

// PutPolicyBundle implements ledger.GuardianStore.
func (s *Store) PutPolicyBundle(ctx context.Context, b ledger.PolicyBundle) error {
	if err := plan.CheckBundle(b); err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, q.InsertBundle, b.ID, b.Version, b.Digest, b.Content, s.opts.Clock()().UnixMicro())
		if err != nil {
			return fmt.Errorf("couldn't store policy bundle %s@%s: %w", b.ID, b.Version, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		var have string
		if err := tx.QueryRowContext(ctx, q.BundleDigest, b.ID, b.Version).Scan(&have); err != nil {
			return fmt.Errorf("couldn't read policy bundle %s@%s: %w", b.ID, b.Version, err)
		}
		if have != b.Digest {
			return fmt.Errorf("policy bundle %s@%s is stored with digest %s, not %s: %w", b.ID, b.Version, have, b.Digest, ledger.ErrConflict)
		}
		return nil
	})
}

// PolicyBundle implements ledger.GuardianStore.
func (s *Store) PolicyBundle(ctx context.Context, id, version string) (ledger.PolicyBundle, error) {
	var b ledger.PolicyBundle
	var at int64
	err := s.read.QueryRowContext(ctx, q.PolicyBundle, id, version).Scan(&b.ID, &b.Version, &b.Digest, &b.Content, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return ledger.PolicyBundle{}, fmt.Errorf("policy bundle %s@%s: %w", id, version, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.PolicyBundle{}, fmt.Errorf("couldn't read policy bundle %s@%s: %w", id, version, err)
	}
	b.RecordedAt = time.UnixMicro(at).UTC()
	return b, nil
}

// PolicyBundles implements ledger.GuardianStore.
func (s *Store) PolicyBundles(ctx context.Context) ([]ledger.PolicyBundle, error) {
	rows, err := s.read.QueryContext(ctx, q.PolicyBundles)
	if err != nil {
		return nil, fmt.Errorf("couldn't list policy bundles: %w", err)
	}
	defer rows.Close()
	var bs []ledger.PolicyBundle
	for rows.Next() {
		var b ledger.PolicyBundle
		var at int64
		if err := rows.Scan(&b.ID, &b.Version, &b.Digest, &at); err != nil {
			return nil, fmt.Errorf("couldn't list policy bundles: %w", err)
		}
		b.RecordedAt = time.UnixMicro(at).UTC()
		bs = append(bs, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("couldn't list policy bundles: %w", err)
	}
	return bs, nil
}
