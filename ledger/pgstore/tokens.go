package pgstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/internal/sqlq"
)

//go:embed tokens.sql
var tokensSQL string

// tokenQueries are tokens.sql's named queries, checked at start as the
// store's own (sqlq.Load).
type tokenQueries struct {
	InsertToken, TokenByHash, Tokens, RevokeToken, TokenExists string
}

var tq = sqlq.Load[tokenQueries](tokensSQL)

var _ ledger.TokenStore = (*Store)(nil)

// CreateToken implements ledger.TokenStore.
func (s *Store) CreateToken(ctx context.Context, t ledger.Token) error {
	_, err := s.pool.Exec(ctx, tq.InsertToken,
		t.Name, t.Hash[:], t.Role, t.Scope, t.CreatedAt, optTime(t.ExpiresAt))
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return fmt.Errorf("couldn't create token %q: %w", t.Name, ledger.ErrTokenExists)
	}
	if err != nil {
		return fmt.Errorf("couldn't create token %q: %w", t.Name, err)
	}
	return nil
}

// TokenByHash implements ledger.TokenStore.
func (s *Store) TokenByHash(ctx context.Context, hash [32]byte) (ledger.Token, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, tq.TokenByHash, hash[:]))
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.Token{}, fmt.Errorf("token: %w", ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Token{}, fmt.Errorf("couldn't look the token up: %w", err)
	}
	return t, nil
}

// Tokens implements ledger.TokenStore.
func (s *Store) Tokens(ctx context.Context) ([]ledger.Token, error) {
	rows, err := s.pool.Query(ctx, tq.Tokens)
	if err != nil {
		return nil, fmt.Errorf("couldn't list tokens: %w", err)
	}
	defer rows.Close()
	var out []ledger.Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("couldn't list tokens: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("couldn't list tokens: %w", err)
	}
	return out, nil
}

// RevokeToken implements ledger.TokenStore.
func (s *Store) RevokeToken(ctx context.Context, name string, at time.Time) error {
	err := inTx(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, tq.RevokeToken, at, name)
		if err != nil || tag.RowsAffected() == 1 {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, tq.TokenExists, name).Scan(&exists); err != nil {
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

func scanToken(row pgx.Row) (ledger.Token, error) {
	var t ledger.Token
	var hash []byte
	var expires, revoked *time.Time
	if err := row.Scan(&t.Name, &hash, &t.Role, &t.Scope, &t.CreatedAt, &expires, &revoked); err != nil {
		return ledger.Token{}, err
	}
	copy(t.Hash[:], hash)
	t.CreatedAt = t.CreatedAt.UTC()
	if expires != nil {
		t.ExpiresAt = expires.UTC()
	}
	if revoked != nil {
		t.RevokedAt = revoked.UTC()
	}
	return t, nil
}

// optTime is t, or NULL for the zero time.
func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
