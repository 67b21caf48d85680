package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/acsledger/acsledger/ledger/tlog"
)

// The RFC 3161 time-stamps of checkpoints (migration 0017), beside the
// checkpoints they stamp. The stamper's reads go to the writer: it must
// see the checkpoints it was just told about, not a replica's past.

var _ tlog.TimestampStorage = (*logStorage)(nil)

func (l *logStorage) AddTimestamp(ctx context.Context, size uint64, response []byte, at time.Time) error {
	if _, err := l.s.d.Writer().Exec(ctx, l.s.q.LogAddTimestamp, int64(size), response, l.s.dl.Time(at)); err != nil {
		return fmt.Errorf("couldn't store the time-stamp of checkpoint %d: %w", size, err)
	}
	return nil
}

func (l *logStorage) Timestamp(ctx context.Context, size uint64) ([]byte, error) {
	var resp []byte
	err := l.one(ctx, &resp, func() string { return fmt.Sprintf("no time-stamp for checkpoint %d", size) }, l.s.q.LogTimestamp, int64(size))
	return resp, err
}

func (l *logStorage) LastStamped(ctx context.Context) (uint64, error) {
	var size int64
	err := l.s.d.Writer().QueryRow(ctx, l.s.q.LogLastStamped).Scan(&size)
	if noRows(err) {
		return 0, fmt.Errorf("%w: no checkpoint is time-stamped", tlog.ErrNotFound)
	}
	return uint64(size), err
}

func (l *logStorage) Unstamped(ctx context.Context, after uint64, limit int) ([]tlog.StoredCheckpoint, error) {
	rows, err := l.s.d.Writer().Query(ctx, l.s.q.LogUnstamped, clampIndex(after), limit)
	if err != nil {
		return nil, fmt.Errorf("couldn't read unstamped checkpoints: %w", err)
	}
	defer rows.Close()
	var out []tlog.StoredCheckpoint
	for rows.Next() {
		var size int64
		var note []byte
		if err := rows.Scan(&size, &note); err != nil {
			return nil, fmt.Errorf("couldn't read unstamped checkpoints: %w", err)
		}
		out = append(out, tlog.StoredCheckpoint{Size: uint64(size), Note: note})
	}
	return out, rows.Err()
}

var _ tlog.CosignatureIndex = (*logStorage)(nil)

func (l *logStorage) CosignedSizes(ctx context.Context, below uint64, limit int) ([]uint64, error) {
	var out []uint64
	err := l.s.eachRow(ctx, l.s.q.LogCosignedSizes, []any{clampIndex(below), limit}, func(r Rows) error {
		var size int64
		err := r.Scan(&size)
		out = append(out, uint64(size))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("couldn't list cosigned checkpoints: %w", err)
	}
	return out, nil
}
