package ingest

import (
	"context"
	"errors"
	"iter"

	"github.com/acsledger/acsledger/ledger"
)

// DefaultBatch is how many records one store transaction takes.
const DefaultBatch = 1000

// Mapper maps one raw record into the record the ledger stores: an entry
// to append, or a quarantined record. It never fails otherwise.
type Mapper interface {
	Map(ctx context.Context, raw Raw) ledger.IngestRecord
}

// Summary counts the outcomes of a run.
type Summary struct {
	Accepted    int `json:"accepted"`
	Duplicate   int `json:"duplicate"`
	Quarantined int `json:"quarantined"`
}

func (s *Summary) add(r ledger.IngestResult) {
	switch r.Status {
	case ledger.IngestAccepted:
		s.Accepted++
	case ledger.IngestDuplicate:
		s.Duplicate++
	default:
		s.Quarantined++
	}
}

// Runner feeds mapped records to a store in batches. Mapping and writing
// overlap: the next batch is mapped while the previous one commits, and at
// most two batches are held, so memory is bounded by the batch size and
// not by the input's.
type Runner struct {
	Store Store
	// Batch is the records per transaction; 0 means DefaultBatch.
	Batch int
	// OnResult, if set, is called for every record in input order.
	OnResult func(ledger.IngestRecord, ledger.IngestResult)
}

// Run maps and stores every raw record of raws. It stops at the first
// store error (the batches before it are committed; re-running the input
// finds them as duplicates) or at a read error: a Raw with Err set and
// Record 0, which it returns wrapping ErrUnreadable when the input was not
// readable at all.
func (r *Runner) Run(ctx context.Context, m Mapper, raws iter.Seq[Raw]) (Summary, error) {
	size := r.Batch
	if size <= 0 {
		size = DefaultBatch
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan []ledger.IngestRecord, 1)
	var readErr error
	go func() {
		defer close(batches)
		batch := make([]ledger.IngestRecord, 0, size)
		for raw := range raws {
			if raw.Err != nil && (raw.Record == 0 || errors.Is(raw.Err, ErrUnreadable)) {
				readErr = raw.Err
				break
			}
			batch = append(batch, m.Map(ctx, raw))
			if len(batch) == size {
				select {
				case batches <- batch:
				case <-ctx.Done():
					return
				}
				batch = make([]ledger.IngestRecord, 0, size)
			}
		}
		if len(batch) > 0 {
			select {
			case batches <- batch:
			case <-ctx.Done():
			}
		}
	}()
	var sum Summary
	for batch := range batches {
		res, err := r.Store.Ingest(ctx, batch)
		if err != nil {
			cancel()
			for range batches {
			}
			return sum, err
		}
		for i, rec := range batch {
			sum.add(res[i])
			if r.OnResult != nil {
				r.OnResult(rec, res[i])
			}
		}
	}
	if readErr != nil {
		return sum, readErr
	}
	return sum, ctx.Err()
}
