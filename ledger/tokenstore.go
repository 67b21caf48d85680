package ledger

import (
	"context"
	"errors"
	"time"
)

// Token is a stored API credential. The token string itself is never
// stored: Hash is its SHA-256, and a request's token is found by hashing
// what it presents (web/auth.go).
type Token struct {
	// Name identifies the token in token list, token revoke and the
	// access log; it is unique.
	Name string
	Hash [32]byte
	// Role is one of admin, writer, auditor, viewer, metrics
	// (docs/security.md).
	Role string
	// Scope, when not empty, limits the token to sessions whose agent id
	// starts with it.
	Scope     string
	CreatedAt time.Time
	// ExpiresAt is zero for a token that does not expire.
	ExpiresAt time.Time
	// RevokedAt is zero for a token that is not revoked.
	RevokedAt time.Time
}

// ErrTokenExists is returned by TokenStore.CreateToken when the name or
// the hash is taken.
var ErrTokenExists = errors.New("a token with this name already exists")

// TokenStore keeps API tokens (migration 0006). Tokens are never deleted:
// a revoked token stays listed with the time it was revoked, so the access
// log's names keep meaning something.
//
//   - CreateToken returns ErrTokenExists when the name (or hash) is taken.
//   - TokenByHash returns ErrNotFound for an unknown hash.
//   - RevokeToken returns ErrNotFound for an unknown name; revoking a
//     revoked token keeps the first revocation time and returns nil.
//   - Tokens lists every token, revoked and expired ones included, by name.
type TokenStore interface {
	CreateToken(ctx context.Context, t Token) error
	TokenByHash(ctx context.Context, hash [32]byte) (Token, error)
	Tokens(ctx context.Context) ([]Token, error)
	RevokeToken(ctx context.Context, name string, at time.Time) error
}
