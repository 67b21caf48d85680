-- 0006: API tokens. Mirrors postgres/0006_tokens.sql; SQLite has no roles,
-- so triggers alone keep a row from changing except for its one
-- revocation. Times are Unix microseconds.
CREATE TABLE api_tokens (
    name         TEXT PRIMARY KEY CHECK (trim(name) <> ''),
    token_sha256 BLOB NOT NULL UNIQUE CHECK (length(token_sha256) = 32),
    role         TEXT NOT NULL CHECK (role IN ('admin', 'writer', 'auditor', 'viewer', 'metrics')),
    scope        TEXT NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER,
    revoked_at   INTEGER
);

CREATE TRIGGER api_tokens_revoke_only BEFORE UPDATE ON api_tokens
WHEN OLD.revoked_at IS NOT NULL OR NEW.revoked_at IS NULL
  OR NEW.name IS NOT OLD.name OR NEW.token_sha256 IS NOT OLD.token_sha256 OR NEW.role IS NOT OLD.role
  OR NEW.scope IS NOT OLD.scope OR NEW.created_at IS NOT OLD.created_at OR NEW.expires_at IS NOT OLD.expires_at
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on api_tokens refused: a token can only be revoked, once'); END;
CREATE TRIGGER api_tokens_no_delete BEFORE DELETE ON api_tokens
BEGIN SELECT RAISE(ABORT, 'acsledger: DELETE on api_tokens refused: tokens are revoked, never deleted'); END;
