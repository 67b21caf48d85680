package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/internal/plan"
)

var _ ledger.GuardianStore = (*Store)(nil)

// AppendSigned implements ledger.GuardianStore. It is its own transaction
// (no group commit): sign runs between planning and writing.
func (s *Store) AppendSigned(ctx context.Context, r ledger.Record, sign func(ledger.Appended) ([]byte, error)) (ledger.Appended, []byte, error) {
	pr, err := plan.Prepare(0, r, s.opts.EntryCap())
	if err != nil {
		return ledger.Appended{}, nil, err
	}
	for attempt := 1; ; attempt++ {
		var res ledger.Appended
		var resp []byte
		err := inTx(ctx, s.pool, func(tx pgx.Tx) error {
			// Always look steps up: a retry must not call sign.
			p, err := s.plan(ctx, tx, []plan.Prepared{pr}, true)
			if err != nil {
				return err
			}
			if err := p.Failed(); err != nil {
				return err
			}
			res = p.Results[0]
			if res.Replayed {
				err := tx.QueryRow(ctx, q["Response"], res.SessionID, res.Position).Scan(&resp)
				if errors.Is(err, pgx.ErrNoRows) {
					return nil // appended without a response
				}
				return err
			}
			if resp, err = sign(res); err != nil {
				return fmt.Errorf("couldn't sign the response for session %q position %d: %w", res.SessionID, res.Position, err)
			}
			if err := s.write(ctx, tx, p); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, q["InsertResponse"], res.SessionID, res.Position, resp, s.opts.Clock()())
			return err
		})
		if err != nil && retryable(err) && attempt < maxAttempts {
			s.replans.Add(1)
			continue
		}
		if err != nil {
			return ledger.Appended{}, nil, err
		}
		return res, resp, nil
	}
}

// Response implements ledger.GuardianStore.
func (s *Store) Response(ctx context.Context, sessionID string, position int64) ([]byte, error) {
	var b []byte
	err := s.pool.QueryRow(ctx, q["Response"], sessionID, position).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("response for session %q position %d: %w", sessionID, position, ledger.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("couldn't read response for session %q position %d: %w", sessionID, position, err)
	}
	return b, nil
}

// RecordRequest implements ledger.GuardianStore.
func (s *Store) RecordRequest(ctx context.Context, sessionID, requestID, nonce string, at time.Time) error {
	if err := plan.CheckRequest(sessionID, requestID, nonce); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, q["RecordRequest"], sessionID, requestID, nonce, at)
	if err != nil {
		return fmt.Errorf("couldn't record request %q of session %q: %w", requestID, sessionID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("request %q (nonce %q) of session %q: %w", requestID, nonce, sessionID, ledger.ErrReplay)
	}
	return nil
}

// PutPolicyBundle implements ledger.GuardianStore.
func (s *Store) PutPolicyBundle(ctx context.Context, b ledger.PolicyBundle) error {
	if err := plan.CheckBundle(b); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, q["InsertBundle"], b.ID, b.Version, b.Digest, b.Content, s.opts.Clock()())
	if err != nil {
		return fmt.Errorf("couldn't store policy bundle %s@%s: %w", b.ID, b.Version, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var have string
	if err := s.pool.QueryRow(ctx, q["BundleDigest"], b.ID, b.Version).Scan(&have); err != nil {
		return fmt.Errorf("couldn't read policy bundle %s@%s: %w", b.ID, b.Version, err)
	}
	if have != b.Digest {
		return fmt.Errorf("policy bundle %s@%s is stored with digest %s, not %s: %w", b.ID, b.Version, have, b.Digest, ledger.ErrConflict)
	}
	return nil
}

// PolicyBundle implements ledger.GuardianStore.
func (s *Store) PolicyBundle(ctx context.Context, id, version string) (ledger.PolicyBundle, error) {
	var b ledger.PolicyBundle
	err := s.pool.QueryRow(ctx, q["PolicyBundle"], id, version).Scan(&b.ID, &b.Version, &b.Digest, &b.Content, &b.RecordedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.PolicyBundle{}, fmt.Errorf("policy bundle %s@%s: %w", id, version, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.PolicyBundle{}, fmt.Errorf("couldn't read policy bundle %s@%s: %w", id, version, err)
	}
	b.RecordedAt = b.RecordedAt.UTC()
	return b, nil
}

// PolicyBundles implements ledger.GuardianStore.
func (s *Store) PolicyBundles(ctx context.Context) ([]ledger.PolicyBundle, error) {
	rows, err := s.pool.Query(ctx, q["PolicyBundles"])
	if err != nil {
		return nil, fmt.Errorf("couldn't list policy bundles: %w", err)
	}
	bs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.PolicyBundle, error) {
		var b ledger.PolicyBundle
		err := row.Scan(&b.ID, &b.Version, &b.Digest, &b.RecordedAt)
		b.RecordedAt = b.RecordedAt.UTC()
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("couldn't list policy bundles: %w", err)
	}
	return bs, nil
}
