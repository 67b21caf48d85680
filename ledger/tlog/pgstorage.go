package tlog

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PGStorage is the [Storage] over PostgreSQL migrated with
// migrations/postgres (0002_merkle.sql). The pool's connections should act
// as acsledger_writer: INSERT and SELECT on the log tables, DELETE on the
// tlog_pending queue and UPDATE on the one-row tlog_head only.
type PGStorage struct {
	pool *pgxpool.Pool
}

var _ Storage = (*PGStorage)(nil)

// NewPGStorage returns storage over the ledger's pool.
func NewPGStorage(pool *pgxpool.Pool) *PGStorage { return &PGStorage{pool: pool} }

// inTx runs fn in one transaction; rollback outlives the caller's context.
func (s *PGStorage) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("couldn't begin transaction: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("couldn't commit: %w", err)
	}
	return nil
}

// uniqueViolation reports a Postgres unique_violation (23505).
func uniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

func (s *PGStorage) Pending(ctx context.Context, after int64, limit int) ([]PendingEntry, error) {
	rows, err := s.pool.Query(ctx, `SELECT p.entry_id, e.session_id, e.position, e.entry_hash
		FROM tlog_pending p JOIN entries e ON e.id = p.entry_id
		WHERE p.entry_id > $1 ORDER BY p.entry_id LIMIT $2`, after, limit)
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

func (s *PGStorage) Integrate(ctx context.Context, start uint64, leaves []StoredLeaf, tiles []FullTile) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var size int64
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(idx) + 1, 0) FROM tlog_leaves`).Scan(&size); err != nil {
			return fmt.Errorf("couldn't read log size: %w", err)
		}
		if uint64(size) != start {
			return fmt.Errorf("%w: log has %d leaves, integrator expected %d", ErrConflict, size, start)
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
				return fmt.Errorf("%w: %v", ErrConflict, err)
			}
			return fmt.Errorf("couldn't insert leaves: %w", err)
		}
		// Every leaf's entry must leave the queue in this transaction: this
		// check is what ties leaves to existing entries (tlog_pending
		// references entries) and makes a second leaf for an entry
		// impossible even without the unique key.
		tag, err := tx.Exec(ctx, `DELETE FROM tlog_pending WHERE entry_id = ANY($1)`, ids)
		if err != nil {
			return fmt.Errorf("couldn't dequeue entries: %w", err)
		}
		if tag.RowsAffected() != int64(len(ids)) {
			return fmt.Errorf("%w: %d of %d entries were not pending", ErrConflict, int64(len(ids))-tag.RowsAffected(), len(ids))
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
		if _, err := tx.Exec(ctx, `INSERT INTO tlog_tiles (level, idx, data, root)
			SELECT * FROM unnest($1::smallint[], $2::bigint[], $3::bytea[], $4::bytea[])`, levels, ns, data, roots); err != nil {
			if uniqueViolation(err) {
				return fmt.Errorf("%w: a tile of %d/%d..%d/%d exists: %v", ErrConflict,
					tiles[0].Level, tiles[0].N, tiles[len(tiles)-1].Level, tiles[len(tiles)-1].N, err)
			}
			return fmt.Errorf("couldn't insert tiles: %w", err)
		}
		return nil
	})
}

func (s *PGStorage) Size(ctx context.Context) (uint64, error) {
	var size int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(max(idx) + 1, 0) FROM tlog_leaves`).Scan(&size)
	return uint64(size), err
}

func (s *PGStorage) Leaves(ctx context.Context, start, end uint64) ([][]byte, error) {
	rows, err := s.pool.Query(ctx, `SELECT idx, data FROM tlog_leaves WHERE idx >= $1 AND idx < $2 ORDER BY idx`, int64(start), int64(end))
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

func (s *PGStorage) FullTile(ctx context.Context, level int, n uint64) ([]byte, error) {
	var data []byte
	err := s.pool.QueryRow(ctx, `SELECT data FROM tlog_tiles WHERE level = $1 AND idx = $2`, level, int64(n)).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: tile %d/%d", ErrNotFound, level, n)
	}
	return data, err
}

func (s *PGStorage) TileRoots(ctx context.Context, level int, from, to uint64) ([]byte, error) {
	rows, err := s.pool.Query(ctx, `SELECT root FROM tlog_tiles WHERE level = $1 AND idx >= $2 AND idx < $3 ORDER BY idx`, level, int64(from), int64(to))
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

func (s *PGStorage) LeafIndexByPosition(ctx context.Context, sessionID string, position int64) (uint64, error) {
	var idx int64
	err := s.pool.QueryRow(ctx, `SELECT l.idx FROM entries e JOIN tlog_leaves l ON l.entry_id = e.id
		WHERE e.session_id = $1 AND e.position = $2`, sessionID, position).Scan(&idx)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("%w: no leaf for session %q position %d", ErrNotFound, sessionID, position)
	}
	return uint64(idx), err
}

func (s *PGStorage) LeafIndexByEntryHash(ctx context.Context, h [HashSize]byte) (uint64, error) {
	var idx int64
	err := s.pool.QueryRow(ctx, `SELECT idx FROM tlog_leaves WHERE entry_hash = $1 ORDER BY idx LIMIT 1`, h[:]).Scan(&idx)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("%w: no leaf for entry_hash %x", ErrNotFound, h)
	}
	return uint64(idx), err
}

func (s *PGStorage) LatestCheckpoint(ctx context.Context) ([]byte, error) {
	var note []byte
	err := s.pool.QueryRow(ctx, `SELECT note FROM tlog_head`).Scan(&note)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: no checkpoint yet", ErrNotFound)
	}
	return note, err
}

func (s *PGStorage) SwapCheckpoint(ctx context.Context, hasOld bool, oldSize, size uint64, note []byte) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO tlog_checkpoints (size, note) VALUES ($1, $2)`, int64(size), note); err != nil {
			if uniqueViolation(err) {
				return fmt.Errorf("%w: a checkpoint for size %d exists", ErrConflict, size)
			}
			return err
		}
		var tag pgconn.CommandTag
		var err error
		if hasOld {
			tag, err = tx.Exec(ctx, `UPDATE tlog_head SET size = $1, note = $2 WHERE size = $3`, int64(size), note, int64(oldSize))
		} else {
			tag, err = tx.Exec(ctx, `INSERT INTO tlog_head (size, note) VALUES ($1, $2) ON CONFLICT DO NOTHING`, int64(size), note)
		}
		if err != nil {
			return fmt.Errorf("couldn't move the latest checkpoint: %w", err)
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("%w: the latest checkpoint moved", ErrConflict)
		}
		return nil
	})
}

func (s *PGStorage) Checkpoint(ctx context.Context, size uint64) ([]byte, error) {
	var note []byte
	err := s.pool.QueryRow(ctx, `SELECT note FROM tlog_checkpoints WHERE size = $1`, int64(size)).Scan(&note)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: no checkpoint for size %d", ErrNotFound, size)
	}
	return note, err
}

func (s *PGStorage) AddCosignature(ctx context.Context, size uint64, line []byte) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO tlog_cosignatures (size, line) VALUES ($1, $2) ON CONFLICT DO NOTHING`, int64(size), line)
	return err
}

func (s *PGStorage) Cosignatures(ctx context.Context, size uint64) ([][]byte, error) {
	rows, err := s.pool.Query(ctx, `SELECT line FROM tlog_cosignatures WHERE size = $1 ORDER BY created_at, line`, int64(size))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[[]byte])
}
