package ingest

import (
	"context"
	"errors"
	"hash/fnv"
	"iter"
	"runtime"
	"sync"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
)

// DefaultBatch is how many records one store transaction takes.
const DefaultBatch = 1000

// Mapper maps one raw record into the record the ledger stores: an entry
// to append, or a quarantined record. It never fails otherwise.
type Mapper interface {
	Map(ctx context.Context, raw Raw) ledger.IngestRecord
}

// mapAll maps raws on every core: mapping (strict parsing, checks,
// building the entry) is most of an ingest's CPU outside the database.
func mapAll(ctx context.Context, m Mapper, raws []Raw) []ledger.IngestRecord {
	out := make([]ledger.IngestRecord, len(raws))
	workers := min(runtime.GOMAXPROCS(0), 8, max(1, len(raws)/64))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(raws); i += workers {
				out[i] = m.Map(ctx, raws[i])
				// Parsed here, on every core, rather than in the store's
				// transaction; an entry that does not parse is left for the
				// store to refuse.
				if r := &out[i]; r.Quarantine == nil && r.Parsed == nil {
					r.Parsed, _ = acs.ParseEntry(r.Entry.Entry)
				}
			}
		}()
	}
	wg.Wait()
	return out
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
// overlap: the next batch is mapped (on every core) while the previous one
// commits, and at most three batches are held (one read, one mapped, one
// being written), so memory is bounded by the batch size and not by the
// input's. A ParallelStore writes each batch in as many transactions at
// once as it says, each for its own share of the sessions (ingestSplit).
type Runner struct {
	Store Store
	// Batch is the records per transaction; 0 means DefaultBatch.
	Batch int
	// OnResult, if set, is called for every record in input order, once
	// its batch committed; OnBatch, if set, after each batch's OnResults.
	OnResult func(ledger.IngestRecord, ledger.IngestResult)
	OnBatch  func()
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
		pending := make([]Raw, 0, size)
		send := func() bool {
			batch := mapAll(ctx, m, pending)
			pending = make([]Raw, 0, size)
			select {
			case batches <- batch:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for raw := range raws {
			if raw.Err != nil && (raw.Record == 0 || errors.Is(raw.Err, ErrUnreadable)) {
				readErr = raw.Err
				break
			}
			pending = append(pending, raw)
			if len(pending) == size && !send() {
				return
			}
		}
		if len(pending) > 0 {
			send()
		}
	}()
	var sum Summary
	writers := 1
	if p, ok := r.Store.(ParallelStore); ok {
		writers = max(1, p.ParallelWriters())
	}
	for batch := range batches {
		res, err := ingestSplit(ctx, r.Store, batch, writers)
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
		if r.OnBatch != nil {
			r.OnBatch()
		}
	}
	if readErr != nil {
		return sum, readErr
	}
	return sum, ctx.Err()
}

// ParallelStore is a Store whose transactions on distinct sessions run in
// parallel (pgstore); ParallelWriters says how many to run at once.
type ParallelStore interface {
	Store
	ParallelWriters() int
}

// splitMin is the smallest batch ingestSplit divides: below it, the
// transactions' fixed costs outweigh what a second one gains.
const splitMin = 256

// ingestSplit ingests batch in up to writers transactions at once, one
// per share of the sessions (records of one session stay in one share, in
// order), and returns the results in batch order. It writes the batch
// whole when the shares would not be independent: when a natural or
// replay key appears in two of them, the order of the records across
// shares would decide which one is the duplicate. So the outcome is the
// one a single transaction gives, except that an error can leave the
// other shares committed; re-running the input then finds them as
// duplicates, as after a crash between two batches.
func ingestSplit(ctx context.Context, st Store, batch []ledger.IngestRecord, writers int) ([]ledger.IngestResult, error) {
	if writers < 2 || len(batch) < splitMin {
		return st.Ingest(ctx, batch)
	}
	share := make([]int, len(batch))
	owner := make(map[[3]string]int, 2*len(batch))
	claim := func(kind, source, key string, w int) bool {
		if key == "" {
			return true
		}
		k := [3]string{kind, source, key}
		if o, seen := owner[k]; seen && o != w {
			return false
		}
		owner[k] = w
		return true
	}
	for i, rec := range batch {
		// A quarantined record touches no session: share 0.
		w := 0
		if rec.Quarantine == nil {
			h := fnv.New32a()
			h.Write([]byte(rec.Entry.SessionID))
			w = int(h.Sum32() % uint32(writers))
		}
		if !claim("key", rec.Source, rec.Key, w) || !claim("replay", rec.Source, rec.ReplayKey, w) {
			return st.Ingest(ctx, batch)
		}
		share[i] = w
	}
	parts := make([][]ledger.IngestRecord, writers)
	at := make([][]int, writers)
	for i, w := range share {
		parts[w] = append(parts[w], batch[i])
		at[w] = append(at[w], i)
	}
	out := make([]ledger.IngestResult, len(batch))
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range parts {
		if len(parts[w]) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := st.Ingest(ctx, parts[w])
			if err != nil {
				errs[w] = err
				return
			}
			for j, i := range at[w] {
				out[i] = res[j]
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// Write stores one batch of mapped records as Runner does: in parallel
// transactions by session share on a ParallelStore, else in one. For a
// caller that maps a whole request itself (the OTLP routes); the
// results are in batch order.
func Write(ctx context.Context, st Store, batch []ledger.IngestRecord) ([]ledger.IngestResult, error) {
	writers := 1
	if p, ok := st.(ParallelStore); ok {
		writers = max(1, p.ParallelWriters())
	}
	return ingestSplit(ctx, st, batch, writers)
}
