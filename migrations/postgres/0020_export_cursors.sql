-- 0020: durable cursors of the export sinks (docs/export.md). Run as the
-- owner role.
--
-- An export cursor is a position in the Merkle log: next_leaf is the
-- index of the first leaf the sink named `name` has not acknowledged.
-- Leaf indexes are gap-free, global, never reused and replicated with the
-- log, so a cursor means the same after a restart and on a standby that
-- was promoted. sending_to is the end of the batch the sink was last
-- handed: after a crash, the leaves in [next_leaf, sending_to) may have
-- arrived already and are delivered again (redelivered counts them).
--
-- This is state, not evidence: a row moves forward by compare-and-swap on
-- next_leaf, and a cursor never moves back (the trigger refuses it).
CREATE TABLE export_cursors (
    name        text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
    next_leaf   bigint NOT NULL CHECK (next_leaf >= 0),
    sending_to  bigint NOT NULL CHECK (sending_to >= next_leaf),
    delivered   bigint NOT NULL DEFAULT 0 CHECK (delivered >= 0),
    redelivered bigint NOT NULL DEFAULT 0 CHECK (redelivered >= 0),
    updated_at  timestamptz NOT NULL
);

CREATE FUNCTION acsledger_export_cursor_forward() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.name <> OLD.name OR NEW.next_leaf < OLD.next_leaf
       OR NEW.delivered < OLD.delivered OR NEW.redelivered < OLD.redelivered THEN
        RAISE EXCEPTION 'acsledger: UPDATE on export_cursors refused for %: a cursor only moves forward', OLD.name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER export_cursors_forward BEFORE UPDATE ON export_cursors
    FOR EACH ROW EXECUTE FUNCTION acsledger_export_cursor_forward();

REVOKE ALL ON export_cursors FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE ON export_cursors TO acsledger_writer;
