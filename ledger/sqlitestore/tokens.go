package sqlitestore

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"time"

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
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, tq.InsertToken,
			t.Name, t.Hash[:], t.Role, t.Scope, t.CreatedAt.UnixMicro(), optMicros(t.ExpiresAt))
		return err
	})
	if isUnique(err) {
		return fmt.Errorf("couldn't create token %q: %w", t.Name, ledger.ErrTokenExists)
	}
	if err != nil {
		return fmt.Errorf("couldn't create token %q: %w", t.Name, err)
	}
	return nil
}

// TokenByHash implements ledger.TokenStore.
func (s *Store) TokenByHash(ctx context.Context, hash [32]byte) (ledger.Token, error) {
	t, err := scanToken(s.read.QueryRowContext(ctx, tq.TokenByHash, hash[:]))
	if errors.Is(err, sql.ErrNoRows) {
		return ledger.Token{}, fmt.Errorf("token: %w", ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Token{}, fmt.Errorf("couldn't look the token up: %w", err)
	}
	return t, nil
}

// Tokens implements ledger.TokenStore.
func (s *Store) Tokens(ctx context.Context) ([]ledger.Token, error) {
	rows, err := s.read.QueryContext(ctx, tq.Tokens)
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
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, tq.RevokeToken, at.UnixMicro(), name)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		var exists int
		if err := tx.QueryRowContext(ctx, tq.TokenExists, name).Scan(&exists); err != nil {
			return err
		}
		if exists == 0 {
			return ledger.ErrNotFound
		}
		return nil // already revoked: the first time stays
	})
	if err != nil {
		return fmt.Errorf("couldn't revoke token %q: %w", name, err)
	}
	return nil
}

func scanToken(row interface{ Scan(...any) error }) (ledger.Token, error) {
	var t ledger.Token
	var hash []byte
	var created int64
	var expires, revoked sql.NullInt64
	if err := row.Scan(&t.Name, &hash, &t.Role, &t.Scope, &created, &expires, &revoked); err != nil {
		return ledger.Token{}, err
	}
	copy(t.Hash[:], hash)
	t.CreatedAt = time.UnixMicro(created).UTC()
	if expires.Valid {
		t.ExpiresAt = time.UnixMicro(expires.Int64).UTC()
	}
	if revoked.Valid {
		t.RevokedAt = time.UnixMicro(revoked.Int64).UTC()
	}
	return t, nil
}

// optMicros is t in Unix microseconds, or NULL for the zero time.
func optMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}
