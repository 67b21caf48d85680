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

// AppendRequest implements ledger.GuardianStore. The replay key is
// inserted in the group's transaction, in the round trip that reads the
// heads, so the check costs no round trip and no commit of its own.
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

// claimSQL inserts replay keys, skipping any that a stored key or an
// earlier one of the same statement already holds, and returns those it
// inserted. A key a concurrent transaction inserted waits for that one to
// end: skipped if it committed, inserted if it rolled back.
const claimSQL = `INSERT INTO requests (session_id, request_id, nonce, seen_at)
SELECT s, r, n, t FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[]) AS k(s, r, n, t)
ON CONFLICT DO NOTHING
RETURNING session_id, request_id`

// queueClaim queues the insert of ps's replay keys on b and sets *refused
// to the replays when the batch runs. It queues nothing when no record
// carries a key.
func queueClaim(b *pgx.Batch, ps []plan.Prepared, refused *map[int]error) {
	var ss, rs, ns []string
	var ts []time.Time
	for _, p := range ps {
		if p.Seen != nil {
			ss, rs, ns, ts = append(ss, p.SessionID), append(rs, p.Seen.RequestID), append(ns, p.Seen.Nonce), append(ts, p.Seen.At)
		}
	}
	if len(ss) == 0 {
		return
	}
	b.Queue(claimSQL, ss, rs, ns, ts).Query(func(rows pgx.Rows) error {
		inserted := make(map[plan.Key]bool, len(ss))
		for rows.Next() {
			var k plan.Key
			if err := rows.Scan(&k.SessionID, &k.StepID); err != nil {
				return err
			}
			inserted[k] = true
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for i, p := range ps {
			if p.Seen == nil {
				continue
			}
			k := plan.Key{SessionID: p.SessionID, StepID: p.Seen.RequestID}
			if inserted[k] {
				delete(inserted, k) // a later record with the same key is the replay
				continue
			}
			if *refused == nil {
				*refused = make(map[int]error)
			}
			(*refused)[i] = plan.ReplayError(p.SessionID, *p.Seen)
		}
		return nil
	})
}

// Response implements ledger.GuardianStore.
func (s *Store) Response(ctx context.Context, sessionID string, position int64) ([]byte, error) {
	var b []byte
	err := s.pool.QueryRow(ctx, q.Response, sessionID, position).Scan(&b)
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
	err := s.pool.QueryRow(ctx, q.RequestParams, sessionID, position).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		// Rarely taken (a step without params, or erased ones), so the
		// erasure is read only then.
		e, err := readErasure(ctx, s.pool, sessionID, position)
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
	return s.opts.OpenParams(sessionID, position, b)
}

// RecordRequest implements ledger.GuardianStore.
func (s *Store) RecordRequest(ctx context.Context, sessionID, requestID, nonce string, at time.Time) error {
	if err := plan.CheckRequest(sessionID, requestID, nonce); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, q.RecordRequest, sessionID, requestID, nonce, at)
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
	tag, err := s.pool.Exec(ctx, q.InsertBundle, b.ID, b.Version, b.Digest, b.Content, s.opts.Clock()())
	if err != nil {
		return fmt.Errorf("couldn't store policy bundle %s@%s: %w", b.ID, b.Version, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var have string
	if err := s.pool.QueryRow(ctx, q.BundleDigest, b.ID, b.Version).Scan(&have); err != nil {
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
	err := s.pool.QueryRow(ctx, q.PolicyBundle, id, version).Scan(&b.ID, &b.Version, &b.Digest, &b.Content, &b.RecordedAt)
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
	rows, err := s.pool.Query(ctx, q.PolicyBundles)
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
