-- 0020: durable cursors of the export sinks. Mirrors
-- postgres/0020_export_cursors.sql: next_leaf is the first Merkle leaf
-- the sink has not acknowledged, sending_to the end of the batch it was
-- last handed; a cursor only moves forward. Times are Unix microseconds.
CREATE TABLE export_cursors (
    name        TEXT PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 64),
    next_leaf   INTEGER NOT NULL CHECK (next_leaf >= 0),
    sending_to  INTEGER NOT NULL CHECK (sending_to >= next_leaf),
    delivered   INTEGER NOT NULL DEFAULT 0 CHECK (delivered >= 0),
    redelivered INTEGER NOT NULL DEFAULT 0 CHECK (redelivered >= 0),
    updated_at  INTEGER NOT NULL
);

CREATE TRIGGER export_cursors_forward BEFORE UPDATE ON export_cursors
WHEN NEW.name IS NOT OLD.name OR NEW.next_leaf < OLD.next_leaf
  OR NEW.delivered < OLD.delivered OR NEW.redelivered < OLD.redelivered
BEGIN SELECT RAISE(ABORT, 'acsledger: UPDATE on export_cursors refused: a cursor only moves forward'); END;
