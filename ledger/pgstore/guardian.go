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

// AppendSigned implements ledger.GuardianStore. It shares group commits
// with Append: sign runs in the committer, inside the transaction, after
// the entry is planned and before it is written; the response and params
// are written in that transaction.
func (s *Store) AppendSigned(ctx context.Context, r ledger.Record, params []byte, sign func(ledger.Appended) ([]byte, error)) (ledger.Appended, []byte, error) {
	p, err := plan.Prepare(0, r, s.opts.EntryCap())
	if err != nil {
		return ledger.Appended{}, nil, err
	}
	p.Sign, p.Params = sign, params
	return s.committer.Append(ctx, p)
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

// Request implements ledger.GuardianStore.
func (s *Store) Request(ctx context.Context, sessionID string, position int64) ([]byte, error) {
	var b []byte
	err := s.pool.QueryRow(ctx, q["RequestParams"], sessionID, position).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("request params for session %q position %d: %w", sessionID, position, ledger.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("couldn't read request params for session %q position %d: %w", sessionID, position, err)
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
