package tlog

import (
	"context"
	"fmt"
)

// Timestamp returns the RFC 3161 time-stamp response (DER TimeStampResp)
// stored for the checkpoint of size (ledger/tsa stamps them);
// ErrNotFound if it has none yet, or the storage keeps none. Only sizes
// the latest checkpoint covers are answered.
func (l *Log) Timestamp(ctx context.Context, size uint64) ([]byte, error) {
	if l.s.Timestamps == nil {
		return nil, fmt.Errorf("%w: this log keeps no time-stamps", ErrNotFound)
	}
	cp, _, err := l.servedSize(ctx)
	if err != nil {
		return nil, err
	}
	if size > cp.Size {
		return nil, fmt.Errorf("%w: size %d is beyond the checkpoint size %d", ErrNotFound, size, cp.Size)
	}
	return l.s.Timestamps.Timestamp(ctx, size)
}

// TimestampStorage returns the storage of time-stamps; nil if the log's
// storage keeps none.
func (l *Log) TimestampStorage() TimestampStorage { return l.s.Timestamps }
