package storetest

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/acsledger/acsledger/ledger"
)

// RunTokens is the conformance suite of ledger.TokenStore. exec runs one
// SQL statement on the store's database bypassing the store (as the
// service role for Postgres); the suite uses it to show that a stored
// token cannot be deleted or changed other than by one revocation.
func RunTokens(t *testing.T, s ledger.TokenStore, exec func(stmt string) error) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 10, 0, 0, 123456000, time.UTC)
	a := ledger.Token{Name: "ci", Hash: sha256.Sum256([]byte("acsl_a")), Role: "writer", Scope: "team-a/", CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}
	b := ledger.Token{Name: "alice", Hash: sha256.Sum256([]byte("acsl_b")), Role: "auditor", CreatedAt: now}
	for _, tok := range []ledger.Token{a, b} {
		if err := s.CreateToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateToken(ctx, ledger.Token{Name: "ci", Hash: sha256.Sum256([]byte("other")), Role: "viewer", CreatedAt: now}); !errors.Is(err, ledger.ErrTokenExists) {
		t.Errorf("second token named ci: %v, want ErrTokenExists", err)
	}
	if err := s.CreateToken(ctx, ledger.Token{Name: "dup", Hash: a.Hash, Role: "viewer", CreatedAt: now}); !errors.Is(err, ledger.ErrTokenExists) {
		t.Errorf("second token with ci's hash: %v, want ErrTokenExists", err)
	}
	if err := s.CreateToken(ctx, ledger.Token{Name: "root", Hash: sha256.Sum256([]byte("r")), Role: "root", CreatedAt: now}); err == nil {
		t.Error("a token with role root was stored")
	}

	got, err := s.TokenByHash(ctx, a.Hash)
	if err != nil || got != a {
		t.Errorf("TokenByHash(ci) = %+v, %v; want %+v", got, err, a)
	}
	if _, err := s.TokenByHash(ctx, sha256.Sum256([]byte("nobody"))); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("unknown hash: %v, want ErrNotFound", err)
	}

	revokedAt := now.Add(time.Hour)
	if err := s.RevokeToken(ctx, "ci", revokedAt); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeToken(ctx, "ci", revokedAt.Add(time.Hour)); err != nil {
		t.Errorf("second revocation: %v", err)
	}
	if err := s.RevokeToken(ctx, "nobody", revokedAt); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("revoke unknown: %v, want ErrNotFound", err)
	}
	list, err := s.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a.RevokedAt = revokedAt
	if len(list) != 2 || list[0] != b || list[1] != a {
		t.Errorf("Tokens() = %+v; want alice, then ci revoked at %v (the first revocation)", list, revokedAt)
	}

	for _, stmt := range []string{
		"DELETE FROM api_tokens WHERE name = 'alice'",
		"UPDATE api_tokens SET role = 'admin' WHERE name = 'alice'",
		"UPDATE api_tokens SET revoked_at = NULL WHERE name = 'ci'",
		"UPDATE api_tokens SET scope = '' WHERE name = 'ci'",
	} {
		if err := exec(stmt); err == nil {
			t.Errorf("%s: succeeded", stmt)
		}
	}
	if again, err := s.Tokens(ctx); err != nil || len(again) != 2 || again[0] != b || again[1] != a {
		t.Errorf("tokens changed by refused statements: %+v %v", again, err)
	}
}
