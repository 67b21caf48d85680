-- 0023: export counters that say what is known. Mirrors
-- postgres/0023_export_sent_unconfirmed.sql: sent_unconfirmed counts
-- entries written to a receiver that never confirms (plain TCP syslog);
-- sending_to, the end of what has been sent at least once, and the new
-- count never move back.
ALTER TABLE export_cursors
    ADD COLUMN sent_unconfirmed INTEGER NOT NULL DEFAULT 0 CHECK (sent_unconfirmed >= 0);

DROP TRIGGER export_cursors_forward;
CREATE TRIGGER export_cursors_forward BEFORE UPDATE ON export_cursors
WHEN NEW.name IS NOT OLD.name OR NEW.next_leaf < OLD.next_leaf OR NEW.sending_to < OLD.sending_to
  OR NEW.delivered < OLD.delivered OR NEW.redelivered < OLD.redelivered
  OR NEW.sent_unconfirmed < OLD.sent_unconfirmed
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on export_cursors refused: a cursor only moves forward'); END;
