package tlog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// SQLiteStorage is the [Storage] over a SQLite database migrated with
// migrations/sqlite (0002_merkle.sql). Writes go through write, which should
// be the ledger's single write connection; reads may use a read-only pool.
type SQLiteStorage struct {
	write, read *sql.DB
}

var _ Storage = (*SQLiteStorage)(nil)

// NewSQLiteStorage returns storage over the ledger's SQLite handles. read may
// be the same handle as write.
func NewSQLiteStorage(write, read *sql.DB) *SQLiteStorage {
	if read == nil {
		read = write
	}
	return &SQLiteStorage{write: write, read: read}
}

func (s *SQLiteStorage) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("couldn't begin transaction: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("couldn't commit: %w", err)
	}
	return nil
}

func (s *SQLiteStorage) Pending(ctx context.Context, after int64, limit int) ([]PendingEntry, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT p.entry_id, e.session_id, e.position, e.entry_hash
		FROM tlog_pending p JOIN entries e ON e.id = p.entry_id
		WHERE p.entry_id > ? ORDER BY p.entry_id LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("couldn't read pending entries: %w", err)
	}
	defer rows.Close()
	var out []PendingEntry
	for rows.Next() {
		var p PendingEntry
		var h []byte
		if err := rows.Scan(&p.EntryID, &p.Leaf.SessionID, &p.Leaf.Position, &h); err != nil {
			return nil, fmt.Errorf("couldn't read pending entries: %w", err)
		}
		if len(h) != HashSize {
			return nil, fmt.Errorf("entry %d has a %d-byte entry_hash", p.EntryID, len(h))
		}
		p.Leaf.EntryHash = [HashSize]byte(h)
		out = append(out, p)
	}
	return out, rows.Err()
}

func sqliteConstraint(err error) bool {
	return err != nil && strings.Contains(err.Error(), "constraint failed")
}

func (s *SQLiteStorage) Integrate(ctx context.Context, start uint64, leaves []StoredLeaf, tiles []FullTile) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		var size uint64
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(idx) + 1, 0) FROM tlog_leaves`).Scan(&size); err != nil {
			return fmt.Errorf("couldn't read log size: %w", err)
		}
		if size != start {
			return fmt.Errorf("%w: log has %d leaves, integrator expected %d", ErrConflict, size, start)
		}
		// Multi-row statements: per statement, SQLite and database/sql
		// cost more than per row.
		for from := 0; from < len(leaves); from += sqliteChunk {
			chunk := leaves[from:min(from+sqliteChunk, len(leaves))]
			args := make([]any, 0, 4*len(chunk))
			ids := make([]any, 0, len(chunk))
			for i, l := range chunk {
				args = append(args, int64(start)+int64(from+i), l.EntryID, l.EntryHash[:], l.Data)
				ids = append(ids, l.EntryID)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO tlog_leaves (idx, entry_id, entry_hash, data) VALUES `+sqlitePlaceholders(len(chunk), 4), args...); err != nil {
				if sqliteConstraint(err) {
					return fmt.Errorf("%w: an entry of leaves %d..%d already has a leaf: %v", ErrConflict, start+uint64(from), start+uint64(from+len(chunk))-1, err)
				}
				return fmt.Errorf("couldn't insert leaves %d..%d: %w", start+uint64(from), start+uint64(from+len(chunk))-1, err)
			}
			// Every leaf's entry must leave the queue in this transaction
			// (see the Postgres storage): the count check ties leaves to
			// pending, hence existing, entries.
			res, err := tx.ExecContext(ctx, `DELETE FROM tlog_pending WHERE entry_id IN `+sqlitePlaceholders(len(chunk), 1), ids...)
			if err != nil {
				return fmt.Errorf("couldn't dequeue entries: %w", err)
			}
			if n, err := res.RowsAffected(); err != nil || n != int64(len(chunk)) {
				return fmt.Errorf("%w: %d of %d entries were not pending", ErrConflict, int64(len(chunk))-n, len(chunk))
			}
		}
		for _, t := range tiles {
			if _, err := tx.ExecContext(ctx, `INSERT INTO tlog_tiles (level, idx, data, root) VALUES (?, ?, ?, ?)`,
				t.Level, int64(t.N), t.Data, t.Root[:]); err != nil {
				if sqliteConstraint(err) {
					return fmt.Errorf("%w: tile %d/%d exists: %v", ErrConflict, t.Level, t.N, err)
				}
				return fmt.Errorf("couldn't insert tile %d/%d: %w", t.Level, t.N, err)
			}
		}
		return nil
	})
}

// sqliteChunk is the number of rows per multi-row statement.
const sqliteChunk = 256

// sqlitePlaceholders returns "(?, ?), (?, ?)" for rows of cols, or
// "(?, ?, ?)" for one column.
func sqlitePlaceholders(rows, cols int) string {
	var b strings.Builder
	if cols == 1 {
		b.WriteString("(?")
		b.WriteString(strings.Repeat(", ?", rows-1))
		b.WriteString(")")
		return b.String()
	}
	row := "(?" + strings.Repeat(", ?", cols-1) + ")"
	b.WriteString(row)
	for range rows - 1 {
		b.WriteString(", ")
		b.WriteString(row)
	}
	return b.String()
}

func (s *SQLiteStorage) Size(ctx context.Context) (uint64, error) {
	var size uint64
	err := s.read.QueryRowContext(ctx, `SELECT coalesce(max(idx) + 1, 0) FROM tlog_leaves`).Scan(&size)
	return size, err
}

func (s *SQLiteStorage) Leaves(ctx context.Context, start, end uint64) ([][]byte, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT idx, data FROM tlog_leaves WHERE idx >= ? AND idx < ? ORDER BY idx`, int64(start), int64(end))
	if err != nil {
		return nil, fmt.Errorf("couldn't read leaves: %w", err)
	}
	defer rows.Close()
	out := make([][]byte, 0, end-start)
	for rows.Next() {
		var idx uint64
		var data []byte
		if err := rows.Scan(&idx, &data); err != nil {
			return nil, err
		}
		if idx != start+uint64(len(out)) {
			return nil, fmt.Errorf("%w: leaf %d is missing", ErrNotFound, start+uint64(len(out)))
		}
		out = append(out, data)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if uint64(len(out)) != end-start {
		return nil, fmt.Errorf("%w: leaf %d is missing", ErrNotFound, start+uint64(len(out)))
	}
	return out, nil
}

func (s *SQLiteStorage) FullTile(ctx context.Context, level int, n uint64) ([]byte, error) {
	var data []byte
	err := s.read.QueryRowContext(ctx, `SELECT data FROM tlog_tiles WHERE level = ? AND idx = ?`, level, int64(n)).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: tile %d/%d", ErrNotFound, level, n)
	}
	return data, err
}

func (s *SQLiteStorage) TileRoots(ctx context.Context, level int, from, to uint64) ([]byte, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT root FROM tlog_tiles WHERE level = ? AND idx >= ? AND idx < ? ORDER BY idx`, level, int64(from), int64(to))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]byte, 0, (to-from)*HashSize)
	for rows.Next() {
		var r []byte
		if err := rows.Scan(&r); err != nil {
			return nil, err
		}
		out = append(out, r...)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if uint64(len(out)) != (to-from)*HashSize {
		return nil, fmt.Errorf("%w: tiles %d/%d..%d incomplete", ErrNotFound, level, from, to)
	}
	return out, nil
}

func (s *SQLiteStorage) LeafIndexByPosition(ctx context.Context, sessionID string, position int64) (uint64, error) {
	var idx uint64
	err := s.read.QueryRowContext(ctx, `SELECT l.idx FROM entries e JOIN tlog_leaves l ON l.entry_id = e.id
		WHERE e.session_id = ? AND e.position = ?`, sessionID, position).Scan(&idx)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("%w: no leaf for session %q position %d", ErrNotFound, sessionID, position)
	}
	return idx, err
}

func (s *SQLiteStorage) LeafIndexByEntryHash(ctx context.Context, h [HashSize]byte) (uint64, error) {
	var idx uint64
	err := s.read.QueryRowContext(ctx, `SELECT idx FROM tlog_leaves WHERE entry_hash = ? ORDER BY idx LIMIT 1`, h[:]).Scan(&idx)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("%w: no leaf for entry_hash %x", ErrNotFound, h)
	}
	return idx, err
}

func (s *SQLiteStorage) LatestCheckpoint(ctx context.Context) ([]byte, error) {
	var note []byte
	err := s.read.QueryRowContext(ctx, `SELECT note FROM tlog_head WHERE singleton = 1`).Scan(&note)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: no checkpoint yet", ErrNotFound)
	}
	return note, err
}

func (s *SQLiteStorage) SwapCheckpoint(ctx context.Context, hasOld bool, oldSize, size uint64, note []byte) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO tlog_checkpoints (size, note, created_at) VALUES (?, ?, ?)`,
			int64(size), note, time.Now().UnixMicro()); err != nil {
			if sqliteConstraint(err) {
				return fmt.Errorf("%w: a checkpoint for size %d exists", ErrConflict, size)
			}
			return err
		}
		var res sql.Result
		var err error
		if hasOld {
			res, err = tx.ExecContext(ctx, `UPDATE tlog_head SET size = ?, note = ? WHERE singleton = 1 AND size = ?`, int64(size), note, int64(oldSize))
		} else {
			res, err = tx.ExecContext(ctx, `INSERT INTO tlog_head (singleton, size, note) VALUES (1, ?, ?) ON CONFLICT DO NOTHING`, int64(size), note)
		}
		if err != nil {
			return fmt.Errorf("couldn't move the latest checkpoint: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("%w: the latest checkpoint moved", ErrConflict)
		}
		return nil
	})
}

func (s *SQLiteStorage) Checkpoint(ctx context.Context, size uint64) ([]byte, error) {
	var note []byte
	err := s.read.QueryRowContext(ctx, `SELECT note FROM tlog_checkpoints WHERE size = ?`, int64(size)).Scan(&note)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: no checkpoint for size %d", ErrNotFound, size)
	}
	return note, err
}

func (s *SQLiteStorage) AddCosignature(ctx context.Context, size uint64, line []byte) error {
	_, err := s.write.ExecContext(ctx, `INSERT INTO tlog_cosignatures (size, line, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
		int64(size), line, time.Now().UnixMicro())
	return err
}

func (s *SQLiteStorage) Cosignatures(ctx context.Context, size uint64) ([][]byte, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT line FROM tlog_cosignatures WHERE size = ? ORDER BY created_at, line`, int64(size))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var l []byte
		if err := rows.Scan(&l); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}
