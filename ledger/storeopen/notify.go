package storeopen

import (
	"context"

	"github.com/acsledger/acsledger/ledger"
)

// NotifyOnAppend returns s telling notify after every committed append
// (Append, AppendBatch, AppendRequest, Ingest), so that the Merkle log's
// integrator (tlog.Log.Notify) wakes at once instead of at its next poll:
// anchoring latency drops from about BatchDelay to one integration.
func NotifyOnAppend(s Store, notify func()) Store { return notifying{Store: s, notify: notify} }

type notifying struct {
	Store
	notify func()
}

func (s notifying) Append(ctx context.Context, r ledger.Record) (ledger.Appended, error) {
	a, err := s.Store.Append(ctx, r)
	s.after(err)
	return a, err
}

func (s notifying) AppendBatch(ctx context.Context, rs []ledger.Record) ([]ledger.Appended, error) {
	a, err := s.Store.AppendBatch(ctx, rs)
	s.after(err)
	return a, err
}

func (s notifying) AppendRequest(ctx context.Context, r ledger.Record, params []byte, seen ledger.Seen, sign func(ledger.Appended) ([]byte, error)) (ledger.Appended, []byte, error) {
	a, resp, err := s.Store.AppendRequest(ctx, r, params, seen, sign)
	s.after(err)
	return a, resp, err
}

// Ingest is the store's: an ingest batch wakes the Merkle log too.
func (s notifying) Ingest(ctx context.Context, rs []ledger.IngestRecord) ([]ledger.IngestResult, error) {
	res, err := s.Store.Ingest(ctx, rs)
	s.after(err)
	return res, err
}

func (s notifying) after(err error) {
	if err == nil {
		s.notify()
	}
}

// ParallelWriters passes on the wrapped store's (ingest.ParallelStore).
func (s notifying) ParallelWriters() int { return ParallelWriters(s.Store) }

// ParallelWriters returns how many ingest transactions s runs at once: its
// ParallelWriters (pgstore), or 1 for a store that has none. A wrapper of
// a store passes it on with this, so that wrapping does not turn the
// parallel writes off.
func ParallelWriters(s any) int {
	if p, ok := s.(interface{ ParallelWriters() int }); ok {
		return p.ParallelWriters()
	}
	return 1
}
