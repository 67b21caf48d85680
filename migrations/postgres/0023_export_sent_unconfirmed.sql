-- 0023: export counters that say what is known (docs/export.md,
-- "Counters"). Run as the owner role.
--
-- sent_unconfirmed counts entries written to a receiver that never
-- confirms (plain TCP syslog); delivered now counts only entries a
-- receiver acknowledged (ledger.ExportCursor.Acknowledged) and
-- redelivered only sends of entries that had been sent before
-- (Resent). sending_to becomes the end of what has been written to a
-- receiver at least once (SentTo), moved after a send, never before one;
-- for a plain TCP syslog sink next_leaf is the start of its re-send
-- window. The columns keep their names. Counts saved before this
-- migration keep the meaning they had then.
--
-- A cursor still never moves back, and now neither does sending_to nor
-- the new count.
ALTER TABLE export_cursors
    ADD COLUMN sent_unconfirmed bigint NOT NULL DEFAULT 0 CHECK (sent_unconfirmed >= 0);

CREATE OR REPLACE FUNCTION acsledger_export_cursor_forward() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.name <> OLD.name OR NEW.next_leaf < OLD.next_leaf OR NEW.sending_to < OLD.sending_to
       OR NEW.delivered < OLD.delivered OR NEW.redelivered < OLD.redelivered
       OR NEW.sent_unconfirmed < OLD.sent_unconfirmed THEN
        RAISE EXCEPTION 'acsledger: UPDATE on export_cursors refused for %: a cursor only moves forward', OLD.name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;
