-- 0005: erasure of request params. Run as the owner role.
--
-- request_params (0003) is stored apart from the chain, which commits to
-- each row only through its entry's request_hash, so a row can go without
-- breaking any hash or proof. This migration lets exactly that happen, and
-- nothing more:
--
--   - erasures records each erasure (when, why, by whom). It is evidence
--     in its own right: append-only like the other evidence tables.
--   - A row of request_params may be deleted only once an erasures row for
--     the same (session_id, position) exists, inserted first in the same
--     transaction (ledger.GuardianStore.EraseParams). Every other DELETE,
--     and every UPDATE and TRUNCATE, is refused for every role, the owner
--     included.
--   - Only acsledger_eraser holds DELETE on request_params and INSERT on
--     erasures. The service acts as acsledger_writer, which holds neither:
--     serving requests cannot erase. The erase command connects with a
--     role that is a member of both (the owner, as for migrate) and does
--     SET LOCAL ROLE acsledger_eraser in its transaction.

-- Roles are cluster-wide: create the eraser only if missing (as 0001 does
-- for the writer).
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'acsledger_eraser') THEN
        CREATE ROLE acsledger_eraser NOLOGIN;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$;

-- The owner may act as the eraser (the URL that migrates can erase).
DO $$
BEGIN
    IF NOT pg_has_role(current_user, 'acsledger_eraser', 'MEMBER') THEN
        EXECUTE format('GRANT acsledger_eraser TO %I', current_user);
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$;

-- erasures: one row per erased params row, written once. The entry it
-- names stays, so the key references entries.
CREATE TABLE erasures (
    session_id text NOT NULL,
    position   bigint NOT NULL,
    erased_at  timestamptz NOT NULL,
    reason     text NOT NULL CHECK (btrim(reason) <> ''),
    erased_by  text NOT NULL,
    PRIMARY KEY (session_id, position),
    FOREIGN KEY (session_id, position) REFERENCES entries (session_id, position)
);

CREATE TRIGGER erasures_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON erasures
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change();

-- request_params: UPDATE and TRUNCATE stay refused per statement; DELETE is
-- checked per row against erasures. A DELETE that matches no row deletes
-- nothing and fires no row trigger.
DROP TRIGGER request_params_append_only ON request_params;
CREATE TRIGGER request_params_append_only BEFORE UPDATE OR TRUNCATE ON request_params
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change();

CREATE FUNCTION acsledger_erased_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM erasures
                   WHERE session_id = OLD.session_id AND position = OLD.position) THEN
        RAISE EXCEPTION 'acsledger: DELETE on request_params refused for session % position %: the table is append-only, and no erasure is recorded for the row',
            OLD.session_id, OLD.position
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN OLD;
END
$$;
CREATE TRIGGER request_params_erased_only BEFORE DELETE ON request_params
    FOR EACH ROW EXECUTE FUNCTION acsledger_erased_only();

REVOKE ALL ON erasures FROM PUBLIC;
-- The writer reads erasures to tell erased params from params never stored.
GRANT SELECT ON erasures TO acsledger_writer;
GRANT SELECT, INSERT ON erasures TO acsledger_eraser;
GRANT SELECT, DELETE ON request_params TO acsledger_eraser;
