-- API tokens (migration 0006; ledger.TokenStore).

-- name: InsertToken
INSERT INTO api_tokens (name, token_sha256, role, scope, created_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?);

-- name: TokenByHash
SELECT name, token_sha256, role, scope, created_at, expires_at, revoked_at
FROM api_tokens WHERE token_sha256 = ?;

-- name: Tokens
SELECT name, token_sha256, role, scope, created_at, expires_at, revoked_at
FROM api_tokens ORDER BY name;

-- name: RevokeToken
UPDATE api_tokens SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL;

-- name: TokenExists
SELECT count(*) FROM api_tokens WHERE name = ?;
