-- 0006: API tokens (docs/security.md). Run as the owner role.
--
-- A token is stored only as the SHA-256 of its string, with its name, role,
-- agent-id scope, creation and expiry. Tokens are never deleted: revoking
-- sets revoked_at once, and nothing else of a row may change, so a name in
-- the access log always names the credential that was used.
CREATE TABLE api_tokens (
    name         text PRIMARY KEY CHECK (btrim(name) <> ''),
    token_sha256 bytea NOT NULL UNIQUE CHECK (octet_length(token_sha256) = 32),
    role         text NOT NULL CHECK (role IN ('admin', 'writer', 'auditor', 'viewer', 'metrics')),
    scope        text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz,
    revoked_at   timestamptz
);

CREATE FUNCTION acsledger_token_revoke_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.revoked_at IS NOT NULL OR NEW.revoked_at IS NULL
       OR (NEW.name, NEW.token_sha256, NEW.role, NEW.scope, NEW.created_at) IS DISTINCT FROM
          (OLD.name, OLD.token_sha256, OLD.role, OLD.scope, OLD.created_at)
       OR NEW.expires_at IS DISTINCT FROM OLD.expires_at THEN
        RAISE EXCEPTION 'acsledger: UPDATE on api_tokens refused for %: a token can only be revoked, once', OLD.name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER api_tokens_revoke_only BEFORE UPDATE ON api_tokens
    FOR EACH ROW EXECUTE FUNCTION acsledger_token_revoke_only();
CREATE TRIGGER api_tokens_no_delete BEFORE DELETE OR TRUNCATE ON api_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change();

REVOKE ALL ON api_tokens FROM PUBLIC;
GRANT SELECT, INSERT ON api_tokens TO acsledger_writer;
GRANT UPDATE (revoked_at) ON api_tokens TO acsledger_writer;
