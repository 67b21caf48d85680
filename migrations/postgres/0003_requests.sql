-- 0003: the request params of Guardian steps. Run as the owner role.
--
-- request_params: the params of the request a Guardian step decided,
-- exactly as received, written beside the step's entry in the same
-- transaction (ledger.GuardianStore.AppendSigned). The chained entry
-- commits to them only through its request_hash (ACS §8.1), so they are
-- stored apart: erasing a row later leaves every hash and proof valid.
--
-- Append-only for now, like the other evidence tables: the writer role may
-- INSERT and SELECT, and UPDATE, DELETE and TRUNCATE are refused for every
-- role. Erasure is future work (docs/storage.md, "Request params"): it will
-- be a later migration that lets a separate eraser role DELETE single rows.
CREATE TABLE request_params (
    session_id  text NOT NULL,
    position    bigint NOT NULL,
    params      bytea NOT NULL,
    recorded_at timestamptz NOT NULL,
    PRIMARY KEY (session_id, position),
    FOREIGN KEY (session_id, position) REFERENCES entries (session_id, position)
);

CREATE TRIGGER request_params_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON request_params
    FOR EACH STATEMENT EXECUTE FUNCTION acsledger_refuse_change();

REVOKE ALL ON request_params FROM PUBLIC;
GRANT SELECT, INSERT ON request_params TO acsledger_writer;
