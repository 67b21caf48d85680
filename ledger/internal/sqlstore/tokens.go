package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/acsledger/acsledger/ledger"
)

var _ ledger.TokenStore = (*Store)(nil)

// CreateToken implements ledger.TokenStore.
func (s *Store) CreateToken(ctx context.Context, t ledger.Token) error {
	_, err := s.d.Writer().Exec(ctx, s.q.InsertToken,
		t.Name, t.Hash[:], t.Role, t.Scope, s.dl.Time(t.CreatedAt), s.optTime(t.ExpiresAt))
	if s.dl.IsUnique(err) {
		return fmt.Errorf("couldn't create token %q: %w", t.Name, ledger.ErrTokenExists)
	}
	if err != nil {
		return fmt.Errorf("couldn't create token %q: %w", t.Name, err)
	}
	return nil
}

// TokenByHash implements ledger.TokenStore.
func (s *Store) TokenByHash(ctx context.Context, hash [32]byte) (ledger.Token, error) {
	t, err := s.scanToken(s.d.Reader().QueryRow(ctx, s.q.TokenByHash, hash[:]))
	if noRows(err) {
		return ledger.Token{}, fmt.Errorf("token: %w", ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Token{}, fmt.Errorf("couldn't look the token up: %w", err)
	}
	return t, nil
}

// Tokens implements ledger.TokenStore.
func (s *Store) Tokens(ctx context.Context) ([]ledger.Token, error) {
	return listRows(ctx, s, "couldn't list tokens", s.q.Tokens, nil, func(r Rows, t *ledger.Token) error {
		var err error
		*t, err = s.scanToken(r)
		return err
	})
}

// RevokeToken implements ledger.TokenStore.
func (s *Store) RevokeToken(ctx context.Context, name string, at time.Time) error {
	err := s.d.InTx(ctx, func(tx Querier) error {
		n, err := tx.Exec(ctx, s.q.RevokeToken, s.dl.Time(at), name)
		if err != nil || n == 1 {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, s.q.TokenExists, name).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return ledger.ErrNotFound
		}
		return nil // already revoked: the first time stays
	})
	if err != nil {
		return fmt.Errorf("couldn't revoke token %q: %w", name, err)
	}
	return nil
}

func (s *Store) scanToken(row Row) (ledger.Token, error) {
	var t ledger.Token
	var hash []byte
	if err := row.Scan(&t.Name, &hash, &t.Role, &t.Scope, s.dl.ScanTime(&t.CreatedAt), NullTime{&t.ExpiresAt}, NullTime{&t.RevokedAt}); err != nil {
		return ledger.Token{}, err
	}
	copy(t.Hash[:], hash)
	t.CreatedAt = t.CreatedAt.UTC()
	return t, nil
}
