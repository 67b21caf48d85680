package sqlstore

import (
	"context"
	"fmt"

	"github.com/acsledger/acsledger/ledger/tlog"
)

// logStorage is the Merkle log's tlog.Storage over the store's database:
// the log's tables live beside the entries they hold leaves for
// (migrations/*/0002_merkle.sql). Reads use the driver's reader, writes its
// writer and transactions; the leaves and tiles are written by the
// driver (Driver.WriteLeaves).
type logStorage struct {
	s *Store
}

var (
	_ tlog.Writer = (*logStorage)(nil)
	_ tlog.Reader = (*logStorage)(nil)
)

// LogStorage returns the storage of the Merkle log over the store's
// database.
func (s *Store) LogStorage() tlog.Storage {
	ls := &logStorage{s: s}
	return tlog.Storage{Writer: ls, Reader: ls, Timestamps: ls, Cosigned: ls}
}

func (l *logStorage) Pending(ctx context.Context, after int64, limit int) ([]tlog.PendingEntry, error) {
	var out []tlog.PendingEntry
	err := l.s.eachRow(ctx, l.s.q.LogPending, []any{after, limit}, func(r Rows) error {
		var p tlog.PendingEntry
		var h []byte
		if err := r.Scan(&p.EntryID, &p.Leaf.SessionID, &p.Leaf.Position, &h); err != nil {
			return fmt.Errorf("couldn't read pending entries: %w", err)
		}
		if len(h) != tlog.HashSize {
			return fmt.Errorf("entry %d has a %d-byte entry_hash", p.EntryID, len(h))
		}
		p.Leaf.EntryHash = [tlog.HashSize]byte(h)
		out = append(out, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (l *logStorage) Integrate(ctx context.Context, start uint64, leaves []tlog.StoredLeaf, tiles []tlog.FullTile) error {
	return l.s.d.InTx(ctx, func(tx Querier) error {
		var size int64
		if err := tx.QueryRow(ctx, l.s.q.LogSize).Scan(&size); err != nil {
			return fmt.Errorf("couldn't read log size: %w", err)
		}
		if uint64(size) != start {
			return fmt.Errorf("%w: log has %d leaves, integrator expected %d", tlog.ErrConflict, size, start)
		}
		return l.s.d.WriteLeaves(ctx, tx, start, leaves, tiles)
	})
}

func (l *logStorage) Size(ctx context.Context) (uint64, error) {
	var size int64
	err := l.s.d.Reader().QueryRow(ctx, l.s.q.LogSize).Scan(&size)
	return uint64(size), err
}

func (l *logStorage) Leaves(ctx context.Context, start, end uint64) ([][]byte, error) {
	rows, err := l.s.d.Reader().Query(ctx, l.s.q.LogLeaves, int64(start), int64(end))
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

func (l *logStorage) FullTile(ctx context.Context, level int, n uint64) ([]byte, error) {
	var data []byte
	err := l.s.d.Reader().QueryRow(ctx, l.s.q.LogFullTile, level, int64(n)).Scan(&data)
	if noRows(err) {
		return nil, fmt.Errorf("%w: tile %d/%d", tlog.ErrNotFound, level, n)
	}
	return data, err
}

func (l *logStorage) TileRoots(ctx context.Context, level int, from, to uint64) ([]byte, error) {
	rows, err := l.s.d.Reader().Query(ctx, l.s.q.LogTileRoots, level, int64(from), int64(to))
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

// one reads a one-column row of query into dest; notFound makes the error
// when there is none, wrapped in tlog.ErrNotFound.
func (l *logStorage) one(ctx context.Context, dest any, notFound func() string, query string, args ...any) error {
	err := l.s.d.Reader().QueryRow(ctx, query, args...).Scan(dest)
	if noRows(err) {
		return fmt.Errorf("%w: %s", tlog.ErrNotFound, notFound())
	}
	return err
}

func (l *logStorage) LeafIndexByPosition(ctx context.Context, sessionID string, position int64) (uint64, error) {
	var idx int64
	err := l.one(ctx, &idx, func() string { return fmt.Sprintf("no leaf for session %q position %d", sessionID, position) },
		l.s.q.LogLeafIndexByPosition, sessionID, position)
	return uint64(idx), err
}

func (l *logStorage) LeafIndexByEntryHash(ctx context.Context, h [tlog.HashSize]byte) (uint64, error) {
	var idx int64
	err := l.one(ctx, &idx, func() string { return fmt.Sprintf("no leaf for entry_hash %x", h) },
		l.s.q.LogLeafIndexByEntryHash, h[:])
	return uint64(idx), err
}

func (l *logStorage) LatestCheckpoint(ctx context.Context) ([]byte, error) {
	var note []byte
	err := l.one(ctx, &note, func() string { return "no checkpoint yet" }, l.s.q.LogLatestCheckpoint)
	return note, err
}

func (l *logStorage) Checkpoint(ctx context.Context, size uint64) ([]byte, error) {
	var note []byte
	err := l.one(ctx, &note, func() string { return fmt.Sprintf("no checkpoint for size %d", size) }, l.s.q.LogCheckpoint, int64(size))
	return note, err
}

func (l *logStorage) FirstCheckpointCovering(ctx context.Context, index uint64) (uint64, []byte, error) {
	var size int64
	var note []byte
	err := l.s.d.Reader().QueryRow(ctx, l.s.q.LogFirstCheckpointAfter, clampIndex(index)).Scan(&size, &note)
	if noRows(err) {
		return 0, nil, fmt.Errorf("%w: no checkpoint covers leaf %d yet", tlog.ErrNotFound, index)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("couldn't find the checkpoint that first covered leaf %d: %w", index, err)
	}
	return uint64(size), note, nil
}

// stamped is args, and the time now where the dialect's log tables take
// it from the statement (Dialect.StampsRows).
func (l *logStorage) stamped(args ...any) []any {
	if l.s.dl.StampsRows() {
		args = append(args, l.s.dl.Time(l.s.opts.Clock()()))
	}
	return args
}

func (l *logStorage) SwapCheckpoint(ctx context.Context, hasOld bool, oldSize, size uint64, note []byte) error {
	return l.s.d.InTx(ctx, func(tx Querier) error {
		if _, err := tx.Exec(ctx, l.s.q.LogInsertCheckpoint, l.stamped(int64(size), note)...); err != nil {
			if l.s.dl.IsUnique(err) {
				return fmt.Errorf("%w: a checkpoint for size %d exists", tlog.ErrConflict, size)
			}
			return err
		}
		var n int64
		var err error
		if hasOld {
			n, err = tx.Exec(ctx, l.s.q.LogMoveHead, int64(size), note, int64(oldSize))
		} else {
			n, err = tx.Exec(ctx, l.s.q.LogInsertHead, int64(size), note)
		}
		if err != nil {
			return fmt.Errorf("couldn't move the latest checkpoint: %w", err)
		}
		if n != 1 {
			return fmt.Errorf("%w: the latest checkpoint moved", tlog.ErrConflict)
		}
		return nil
	})
}

func (l *logStorage) AddCosignature(ctx context.Context, size uint64, line []byte) error {
	_, err := l.s.d.Writer().Exec(ctx, l.s.q.LogAddCosignature, l.stamped(int64(size), line)...)
	return err
}

func (l *logStorage) Cosignatures(ctx context.Context, size uint64) ([][]byte, error) {
	var out [][]byte
	err := l.s.eachRow(ctx, l.s.q.LogCosignatures, []any{int64(size)}, func(r Rows) error {
		var line []byte
		err := r.Scan(&line)
		out = append(out, line)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (l *logStorage) SessionLeaves(ctx context.Context, sessionID string, from, to uint64, limit int) ([]tlog.IndexedLeaf, error) {
	var out []tlog.IndexedLeaf
	err := l.s.eachRow(ctx, l.s.q.LogSessionLeaves, []any{sessionID, int64(from), clampIndex(to), limit}, func(r Rows) error {
		var leaf tlog.IndexedLeaf
		var idx int64
		err := r.Scan(&idx, &leaf.Data)
		leaf.Index = uint64(idx)
		out = append(out, leaf)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("couldn't read the leaves of session %q: %w", sessionID, err)
	}
	return out, nil
}

func (l *logStorage) LastSessionLeaf(ctx context.Context, sessionID string, to uint64) (tlog.IndexedLeaf, error) {
	var leaf tlog.IndexedLeaf
	var idx int64
	err := l.s.d.Reader().QueryRow(ctx, l.s.q.LogLastSessionLeaf, sessionID, clampIndex(to)).Scan(&idx, &leaf.Data)
	if noRows(err) {
		return leaf, fmt.Errorf("%w: no leaf of session %q below index %d", tlog.ErrNotFound, sessionID, to)
	}
	if err != nil {
		return leaf, fmt.Errorf("couldn't read the last leaf of session %q: %w", sessionID, err)
	}
	leaf.Index = uint64(idx)
	return leaf, nil
}

// clampIndex converts an exclusive upper bound on leaf indexes to a 64-bit
// integer column's: no leaf index reaches 2^63.
func clampIndex(to uint64) int64 {
	return int64(min(to, 1<<63-1))
}
