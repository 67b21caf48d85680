package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/acsledger/acsledger/ledger/tlog"
)

// logStorage is the Merkle log's tlog.Storage over the store's SQLite
// file (migrations/sqlite 0002_merkle.sql): writes go through the store's
// one write connection and its transaction helper, reads use its read-only
// pool.
type logStorage struct {
	st *Store
}

var _ tlog.Storage = (*logStorage)(nil)

// LogStorage returns the storage of the Merkle log over the store's
// database: the log's tables live beside the entries they hold leaves for.
func (s *Store) LogStorage() tlog.Storage { return &logStorage{st: s} }

func (s *logStorage) Pending(ctx context.Context, after int64, limit int) ([]tlog.PendingEntry, error) {
	rows, err := s.st.read.QueryContext(ctx, q.LogPending, after, limit)
	if err != nil {
		return nil, fmt.Errorf("couldn't read pending entries: %w", err)
	}
	defer rows.Close()
	var out []tlog.PendingEntry
	for rows.Next() {
		var p tlog.PendingEntry
		var h []byte
		if err := rows.Scan(&p.EntryID, &p.Leaf.SessionID, &p.Leaf.Position, &h); err != nil {
			return nil, fmt.Errorf("couldn't read pending entries: %w", err)
		}
		if len(h) != tlog.HashSize {
			return nil, fmt.Errorf("entry %d has a %d-byte entry_hash", p.EntryID, len(h))
		}
		p.Leaf.EntryHash = [tlog.HashSize]byte(h)
		out = append(out, p)
	}
	return out, rows.Err()
}

// constraintFailed reports a violated key or check (unique, primary key,
// foreign key, CHECK, NOT NULL), which is how a second write of a row the
// log writes once fails. A trigger's RAISE is not one: the append-only
// triggers refuse what the log never does.
func constraintFailed(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT && se.Code() != sqlite3.SQLITE_CONSTRAINT_TRIGGER
}

func (s *logStorage) Integrate(ctx context.Context, start uint64, leaves []tlog.StoredLeaf, tiles []tlog.FullTile) error {
	return s.st.inTx(ctx, func(tx *sql.Tx) error {
		var size uint64
		if err := tx.QueryRowContext(ctx, q.LogSize).Scan(&size); err != nil {
			return fmt.Errorf("couldn't read log size: %w", err)
		}
		if size != start {
			return fmt.Errorf("%w: log has %d leaves, integrator expected %d", tlog.ErrConflict, size, start)
		}
		// Multi-row statements: per statement, SQLite and database/sql
		// cost more than per row.
		for from := 0; from < len(leaves); from += leafChunk {
			chunk := leaves[from:min(from+leafChunk, len(leaves))]
			args := make([]any, 0, 4*len(chunk))
			ids := make([]any, 0, len(chunk))
			for i, l := range chunk {
				args = append(args, int64(start)+int64(from+i), l.EntryID, l.EntryHash[:], l.Data)
				ids = append(ids, l.EntryID)
			}
			if _, err := tx.ExecContext(ctx, q.LogInsertLeaves+" "+placeholders(len(chunk), 4), args...); err != nil {
				if constraintFailed(err) {
					return fmt.Errorf("%w: an entry of leaves %d..%d already has a leaf: %v", tlog.ErrConflict, start+uint64(from), start+uint64(from+len(chunk))-1, err)
				}
				return fmt.Errorf("couldn't insert leaves %d..%d: %w", start+uint64(from), start+uint64(from+len(chunk))-1, err)
			}
			// Every leaf's entry must leave the queue in this transaction
			// (as in the Postgres store): the count check ties leaves to
			// pending, hence existing, entries.
			res, err := tx.ExecContext(ctx, q.LogDequeue+" "+placeholders(len(chunk), 1), ids...)
			if err != nil {
				return fmt.Errorf("couldn't dequeue entries: %w", err)
			}
			if n, err := res.RowsAffected(); err != nil || n != int64(len(chunk)) {
				return fmt.Errorf("%w: %d of %d entries were not pending", tlog.ErrConflict, int64(len(chunk))-n, len(chunk))
			}
		}
		for _, t := range tiles {
			if _, err := tx.ExecContext(ctx, q.LogInsertTile,
				t.Level, int64(t.N), t.Data, t.Root[:]); err != nil {
				if constraintFailed(err) {
					return fmt.Errorf("%w: tile %d/%d exists: %v", tlog.ErrConflict, t.Level, t.N, err)
				}
				return fmt.Errorf("couldn't insert tile %d/%d: %w", t.Level, t.N, err)
			}
		}
		return nil
	})
}

// leafChunk is the number of rows per multi-row statement.
const leafChunk = 256

// placeholders returns "(?, ?), (?, ?)" for rows of cols, or
// "(?, ?, ?)" for one column.
func placeholders(rows, cols int) string {
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

func (s *logStorage) Size(ctx context.Context) (uint64, error) {
	var size uint64
	err := s.st.read.QueryRowContext(ctx, q.LogSize).Scan(&size)
	return size, err
}

func (s *logStorage) Leaves(ctx context.Context, start, end uint64) ([][]byte, error) {
	rows, err := s.st.read.QueryContext(ctx, q.LogLeaves, int64(start), int64(end))
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
			return nil, fmt.Errorf("%w: leaf %d is missing", tlog.ErrNotFound, start+uint64(len(out)))
		}
		out = append(out, data)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if uint64(len(out)) != end-start {
		return nil, fmt.Errorf("%w: leaf %d is missing", tlog.ErrNotFound, start+uint64(len(out)))
	}
	return out, nil
}

func (s *logStorage) FullTile(ctx context.Context, level int, n uint64) ([]byte, error) {
	var data []byte
	err := s.st.read.QueryRowContext(ctx, q.LogFullTile, level, int64(n)).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: tile %d/%d", tlog.ErrNotFound, level, n)
	}
	return data, err
}

func (s *logStorage) TileRoots(ctx context.Context, level int, from, to uint64) ([]byte, error) {
	rows, err := s.st.read.QueryContext(ctx, q.LogTileRoots, level, int64(from), int64(to))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]byte, 0, (to-from)*tlog.HashSize)
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
	if uint64(len(out)) != (to-from)*tlog.HashSize {
		return nil, fmt.Errorf("%w: tiles %d/%d..%d incomplete", tlog.ErrNotFound, level, from, to)
	}
	return out, nil
}

func (s *logStorage) LeafIndexByPosition(ctx context.Context, sessionID string, position int64) (uint64, error) {
	var idx uint64
	err := s.st.read.QueryRowContext(ctx, q.LogLeafIndexByPosition, sessionID, position).Scan(&idx)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("%w: no leaf for session %q position %d", tlog.ErrNotFound, sessionID, position)
	}
	return idx, err
}

func (s *logStorage) LeafIndexByEntryHash(ctx context.Context, h [tlog.HashSize]byte) (uint64, error) {
	var idx uint64
	err := s.st.read.QueryRowContext(ctx, q.LogLeafIndexByEntryHash, h[:]).Scan(&idx)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("%w: no leaf for entry_hash %x", tlog.ErrNotFound, h)
	}
	return idx, err
}

func (s *logStorage) LatestCheckpoint(ctx context.Context) ([]byte, error) {
	var note []byte
	err := s.st.read.QueryRowContext(ctx, q.LogLatestCheckpoint).Scan(&note)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: no checkpoint yet", tlog.ErrNotFound)
	}
	return note, err
}

func (s *logStorage) SwapCheckpoint(ctx context.Context, hasOld bool, oldSize, size uint64, note []byte) error {
	return s.st.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, q.LogInsertCheckpoint,
			int64(size), note, s.st.opts.Clock()().UnixMicro()); err != nil {
			if constraintFailed(err) {
				return fmt.Errorf("%w: a checkpoint for size %d exists", tlog.ErrConflict, size)
			}
			return err
		}
		var res sql.Result
		var err error
		if hasOld {
			res, err = tx.ExecContext(ctx, q.LogMoveHead, int64(size), note, int64(oldSize))
		} else {
			res, err = tx.ExecContext(ctx, q.LogInsertHead, int64(size), note)
		}
		if err != nil {
			return fmt.Errorf("couldn't move the latest checkpoint: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("%w: the latest checkpoint moved", tlog.ErrConflict)
		}
		return nil
	})
}

func (s *logStorage) Checkpoint(ctx context.Context, size uint64) ([]byte, error) {
	var note []byte
	err := s.st.read.QueryRowContext(ctx, q.LogCheckpoint, int64(size)).Scan(&note)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: no checkpoint for size %d", tlog.ErrNotFound, size)
	}
	return note, err
}

func (s *logStorage) AddCosignature(ctx context.Context, size uint64, line []byte) error {
	_, err := s.st.write.ExecContext(ctx, q.LogAddCosignature,
		int64(size), line, s.st.opts.Clock()().UnixMicro())
	return err
}

func (s *logStorage) Cosignatures(ctx context.Context, size uint64) ([][]byte, error) {
	rows, err := s.st.read.QueryContext(ctx, q.LogCosignatures, int64(size))
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

func (s *logStorage) SessionLeaves(ctx context.Context, sessionID string, from, to uint64, limit int) ([]tlog.IndexedLeaf, error) {
	rows, err := s.st.read.QueryContext(ctx, q.LogSessionLeaves, sessionID, int64(from), clampIndex(to), limit)
	if err != nil {
		return nil, fmt.Errorf("couldn't read the leaves of session %q: %w", sessionID, err)
	}
	defer rows.Close()
	var out []tlog.IndexedLeaf
	for rows.Next() {
		var l tlog.IndexedLeaf
		if err := rows.Scan(&l.Index, &l.Data); err != nil {
			return nil, fmt.Errorf("couldn't read the leaves of session %q: %w", sessionID, err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("couldn't read the leaves of session %q: %w", sessionID, err)
	}
	return out, nil
}

func (s *logStorage) LastSessionLeaf(ctx context.Context, sessionID string, to uint64) (tlog.IndexedLeaf, error) {
	var l tlog.IndexedLeaf
	err := s.st.read.QueryRowContext(ctx, q.LogLastSessionLeaf, sessionID, clampIndex(to)).Scan(&l.Index, &l.Data)
	if errors.Is(err, sql.ErrNoRows) {
		return l, fmt.Errorf("%w: no leaf of session %q below index %d", tlog.ErrNotFound, sessionID, to)
	}
	if err != nil {
		return l, fmt.Errorf("couldn't read the last leaf of session %q: %w", sessionID, err)
	}
	return l, nil
}

// clampIndex converts an exclusive upper bound on leaf indexes to an
// INTEGER: no leaf index reaches 2^63.
func clampIndex(to uint64) int64 {
	return int64(min(to, 1<<63-1))
}
