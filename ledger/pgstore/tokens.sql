-- API tokens (migration 0006; ledger.TokenStore).

-- name: InsertToken
INSERT INTO api_tokens (name, token_sha256, role, scope, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6);

-- name: TokenByHash
SELECT name, token_sha256, role, scope, created_at, expires_at, revoked_at
FROM api_tokens WHERE token_sha256 = $1;

-- name: Tokens
SELECT name, token_sha256, role, scope, created_at, expires_at, revoked_at
FROM api_tokens ORDER BY name;

-- name: RevokeToken
UPDATE api_tokens SET revoked_at = $1 WHERE name = $2 AND revoked_at IS NULL;

-- name: TokenExists
SELECT EXISTS (SELECT FROM api_tokens WHERE name = $1);
