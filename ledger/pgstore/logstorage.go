package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acsledger/acsledger/ledger/tlog"
)

// logStorage is the Merkle log's tlog.Storage over the store's pool, whose
// connections act as acsledger_writer: INSERT and SELECT on the log tables
// (migrations/postgres 0002_merkle.sql), SELECT and DELETE on the
// tlog_pending queue (which only the enqueue trigger fills, 0014) and
// UPDATE on the one-row tlog_head only.
type logStorage struct {
	pool *pgxpool.Pool
}

var _ tlog.Storage = (*logStorage)(nil)

// LogStorage returns the storage of the Merkle log over the store's
// database: the log's tables live beside the entries they hold leaves for.
func (s *Store) LogStorage() tlog.Storage { return &logStorage{pool: s.pool} }

// uniqueViolation reports a Postgres unique_violation (23505).
func uniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

func (s *logStorage) Pending(ctx context.Context, after int64, limit int) ([]tlog.PendingEntry, error) {
	rows, err := s.pool.Query(ctx, q.LogPending, after, limit)
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

func (s *logStorage) Integrate(ctx context.Context, start uint64, leaves []tlog.StoredLeaf, tiles []tlog.FullTile) error {
	return inTx(ctx, s.pool, func(tx pgx.Tx) error {
		var size int64
		if err := tx.QueryRow(ctx, q.LogSize).Scan(&size); err != nil {
			return fmt.Errorf("couldn't read log size: %w", err)
		}
		if uint64(size) != start {
			return fmt.Errorf("%w: log has %d leaves, integrator expected %d", tlog.ErrConflict, size, start)
		}
		// COPY is the cheapest way to write many rows. A concurrent
		// integrator inserting the same idx blocks on the primary key and
		// then fails here: the leaf insert is the compare-and-swap.
		ids := make([]int64, len(leaves))
		i := 0
		rows := pgx.CopyFromFunc(func() ([]any, error) {
			if i == len(leaves) {
				return nil, nil
			}
			l := &leaves[i]
			ids[i] = l.EntryID
			row := []any{int64(start) + int64(i), l.EntryID, l.EntryHash[:], l.Data}
			i++
			return row, nil
		})
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"tlog_leaves"}, []string{"idx", "entry_id", "entry_hash", "data"}, rows); err != nil {
			if uniqueViolation(err) {
				return fmt.Errorf("%w: %v", tlog.ErrConflict, err)
			}
			return fmt.Errorf("couldn't insert leaves: %w", err)
		}
		// Every leaf's entry must leave the queue in this transaction: this
		// check is what ties leaves to existing entries (only the
		// entries' enqueue trigger writes the queue, migration 0014) and
		// makes a second leaf for an entry impossible even without the
		// unique key.
		tag, err := tx.Exec(ctx, q.LogDequeue, ids)
		if err != nil {
			return fmt.Errorf("couldn't dequeue entries: %w", err)
		}
		if tag.RowsAffected() != int64(len(ids)) {
			return fmt.Errorf("%w: %d of %d entries were not pending", tlog.ErrConflict, int64(len(ids))-tag.RowsAffected(), len(ids))
		}
		if len(tiles) == 0 {
			return nil
		}
		levels := make([]int16, len(tiles))
		ns := make([]int64, len(tiles))
		data := make([][]byte, len(tiles))
		roots := make([][]byte, len(tiles))
		for i, t := range tiles {
			levels[i], ns[i], data[i], roots[i] = int16(t.Level), int64(t.N), t.Data, t.Root[:]
		}
		if _, err := tx.Exec(ctx, q.LogInsertTiles, levels, ns, data, roots); err != nil {
			if uniqueViolation(err) {
				return fmt.Errorf("%w: a tile of %d/%d..%d/%d exists: %v", tlog.ErrConflict,
					tiles[0].Level, tiles[0].N, tiles[len(tiles)-1].Level, tiles[len(tiles)-1].N, err)
			}
			return fmt.Errorf("couldn't insert tiles: %w", err)
		}
		return nil
	})
}

func (s *logStorage) Size(ctx context.Context) (uint64, error) {
	var size int64
	err := s.pool.QueryRow(ctx, q.LogSize).Scan(&size)
	return uint64(size), err
}

func (s *logStorage) Leaves(ctx context.Context, start, end uint64) ([][]byte, error) {
	rows, err := s.pool.Query(ctx, q.LogLeaves, int64(start), int64(end))
	if err != nil {
		return nil, fmt.Errorf("couldn't read leaves: %w", err)
	}
	defer rows.Close()
	out := make([][]byte, 0, end-start)
	for rows.Next() {
		var idx int64
		var data []byte
		if err := rows.Scan(&idx, &data); err != nil {
			return nil, err
		}
		if uint64(idx) != start+uint64(len(out)) {
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
	err := s.pool.QueryRow(ctx, q.LogFullTile, level, int64(n)).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: tile %d/%d", tlog.ErrNotFound, level, n)
	}
	return data, err
}

func (s *logStorage) TileRoots(ctx context.Context, level int, from, to uint64) ([]byte, error) {
	rows, err := s.pool.Query(ctx, q.LogTileRoots, level, int64(from), int64(to))
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
	var idx int64
	err := s.pool.QueryRow(ctx, q.LogLeafIndexByPosition, sessionID, position).Scan(&idx)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("%w: no leaf for session %q position %d", tlog.ErrNotFound, sessionID, position)
	}
	return uint64(idx), err
}

func (s *logStorage) LeafIndexByEntryHash(ctx context.Context, h [tlog.HashSize]byte) (uint64, error) {
	var idx int64
	err := s.pool.QueryRow(ctx, q.LogLeafIndexByEntryHash, h[:]).Scan(&idx)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("%w: no leaf for entry_hash %x", tlog.ErrNotFound, h)
	}
	return uint64(idx), err
}

func (s *logStorage) LatestCheckpoint(ctx context.Context) ([]byte, error) {
	var note []byte
	err := s.pool.QueryRow(ctx, q.LogLatestCheckpoint).Scan(&note)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: no checkpoint yet", tlog.ErrNotFound)
	}
	return note, err
}

func (s *logStorage) SwapCheckpoint(ctx context.Context, hasOld bool, oldSize, size uint64, note []byte) error {
	return inTx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, q.LogInsertCheckpoint, int64(size), note); err != nil {
			if uniqueViolation(err) {
				return fmt.Errorf("%w: a checkpoint for size %d exists", tlog.ErrConflict, size)
			}
			return err
		}
		var tag pgconn.CommandTag
		var err error
		if hasOld {
			tag, err = tx.Exec(ctx, q.LogMoveHead, int64(size), note, int64(oldSize))
		} else {
			tag, err = tx.Exec(ctx, q.LogInsertHead, int64(size), note)
		}
		if err != nil {
			return fmt.Errorf("couldn't move the latest checkpoint: %w", err)
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("%w: the latest checkpoint moved", tlog.ErrConflict)
		}
		return nil
	})
}

func (s *logStorage) Checkpoint(ctx context.Context, size uint64) ([]byte, error) {
	var note []byte
	err := s.pool.QueryRow(ctx, q.LogCheckpoint, int64(size)).Scan(&note)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: no checkpoint for size %d", tlog.ErrNotFound, size)
	}
	return note, err
}

func (s *logStorage) AddCosignature(ctx context.Context, size uint64, line []byte) error {
	_, err := s.pool.Exec(ctx, q.LogAddCosignature, int64(size), line)
	return err
}

func (s *logStorage) Cosignatures(ctx context.Context, size uint64) ([][]byte, error) {
	rows, err := s.pool.Query(ctx, q.LogCosignatures, int64(size))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[[]byte])
}

func (s *logStorage) SessionLeaves(ctx context.Context, sessionID string, from, to uint64, limit int) ([]tlog.IndexedLeaf, error) {
	rows, err := s.pool.Query(ctx, q.LogSessionLeaves, sessionID, int64(from), clampIndex(to), limit)
	if err != nil {
		return nil, fmt.Errorf("couldn't read the leaves of session %q: %w", sessionID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (tlog.IndexedLeaf, error) {
		var l tlog.IndexedLeaf
		var idx int64
		err := r.Scan(&idx, &l.Data)
		l.Index = uint64(idx)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("couldn't read the leaves of session %q: %w", sessionID, err)
	}
	return out, nil
}

func (s *logStorage) LastSessionLeaf(ctx context.Context, sessionID string, to uint64) (tlog.IndexedLeaf, error) {
	var l tlog.IndexedLeaf
	var idx int64
	err := s.pool.QueryRow(ctx, q.LogLastSessionLeaf, sessionID, clampIndex(to)).Scan(&idx, &l.Data)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, fmt.Errorf("%w: no leaf of session %q below index %d", tlog.ErrNotFound, sessionID, to)
	}
	if err != nil {
		return l, fmt.Errorf("couldn't read the last leaf of session %q: %w", sessionID, err)
	}
	l.Index = uint64(idx)
	return l, nil
}

// clampIndex converts an exclusive upper bound on leaf indexes to bigint:
// no leaf index reaches 2^63.
func clampIndex(to uint64) int64 {
	return int64(min(to, 1<<63-1))
}
