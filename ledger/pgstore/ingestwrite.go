package pgstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/internal/plan"
	"github.com/acsledger/acsledger/ledger/internal/sqlstore"
)

var _ ledger.IngestStore = (*Store)(nil)

var ingestColumns = []string{"source", "natural_key", "replay_key", "digest", "session_id", "position",
	"entry_hash", "flags", "file", "record", "recorded_at"}

var sourceColumns = []string{"session_id", "position", "source_sha256", "record", "recorded_at"}

// Ingest implements ledger.IngestStore. The batch is one transaction: the
// stored keys are read under the sessions' advisory locks, the entries are
// appended as AppendBatch appends them (heads moved by compare-and-swap),
// and the keys and quarantined records are inserted beside them. A
// concurrent ingester that inserted one of the keys first makes the insert
// fail on the unique key; the transaction is then re-planned, and finds the
// key stored.
//
// The first attempt assumes the batch is new, as a bulk ingest's batches
// are, and skips reading the stored keys and steps: a record that is in
// fact stored fails the transaction on a unique key, and the next attempt
// reads them.
func (s *Store) Ingest(ctx context.Context, rs []ledger.IngestRecord) ([]ledger.IngestResult, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	for attempt := 1; ; attempt++ {
		var in *plan.Ingest
		var p *plan.Plan
		err := inTx(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			lookup := attempt > 1
			if in, err = s.classify(ctx, tx, rs, lookup); err != nil {
				return err
			}
			if len(in.Prepared) > 0 {
				var refused map[int]error
				if p, _, err = s.plan(ctx, tx, in.Prepared, lookup, false, &refused); err != nil {
					return err
				}
				// A record failing without the lookups (a published head
				// that is not the new one) may be stored already: judge
				// the batch again with them.
				if !lookup && p.Failed() != nil {
					if in, err = s.classify(ctx, tx, rs, true); err != nil {
						return err
					}
					p = &plan.Plan{}
					if len(in.Prepared) > 0 {
						if p, _, err = s.plan(ctx, tx, in.Prepared, true, false, &refused); err != nil {
							return err
						}
					}
				}
				// The batch may have been classified again since the
				// first plan: write takes the locks of what it writes.
				if err := s.write(ctx, tx, p, false); err != nil {
					return err
				}
				in.Finish(p)
			} else {
				in.Finish(&plan.Plan{})
			}
			return s.writeIngest(ctx, tx, in)
		})
		var prepared []plan.Prepared
		if in != nil {
			prepared = in.Prepared
		}
		switch again, err := s.settle(ctx, err, attempt, prepared, p); {
		case again && err == nil:
			continue
		case again:
			return nil, err // the wait for the next attempt was cut short
		case err != nil:
			return nil, fmt.Errorf("couldn't ingest %d records: %w", len(rs), err)
		}
		return in.Results, nil
	}
}

// classify reads the stored keys of rs (with lookup) and decides what
// each record becomes.
func (s *Store) classify(ctx context.Context, tx pgx.Tx, rs []ledger.IngestRecord, lookup bool) (*plan.Ingest, error) {
	keys, replayKeys := plan.IngestKeys(rs)
	if !lookup {
		keys, replayKeys = nil, nil
	}
	stored := make(map[plan.IngestKey]ledger.IngestResult)
	digests := make(map[plan.IngestKey]acs.Hash)
	replays := make(map[plan.IngestKey]string)
	b := &pgx.Batch{}
	if len(keys) > 0 {
		srcs, ks := splitKeys(keys)
		b.Queue(q.IngestedKeys, srcs, ks).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				r, d, err := sqlstore.ScanIngested(s.Store, rows)
				if err != nil {
					return err
				}
				k := plan.IngestKey{Source: r.Source, Key: r.Key}
				stored[k], digests[k] = r, d
			}
			return rows.Err()
		})
	}
	if len(replayKeys) > 0 {
		srcs, ks := splitKeys(replayKeys)
		b.Queue(q.IngestedReplayKeys, srcs, ks).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var src, rk, nk string
				if err := rows.Scan(&src, &rk, &nk); err != nil {
					return err
				}
				replays[plan.IngestKey{Source: src, Key: rk}] = nk
			}
			return rows.Err()
		})
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return nil, fmt.Errorf("couldn't read ingested keys: %w", err)
		}
	}
	return plan.NewIngest(rs, stored, digests, replays, s.opts.EntryCap()), nil
}

// writeIngest inserts the keys of the accepted records and the quarantined
// records, in one round trip.
func (s *Store) writeIngest(ctx context.Context, tx pgx.Tx, in *plan.Ingest) error {
	now := s.opts.Clock()()
	b := &pgx.Batch{}
	if acc := in.Accepted(); len(acc) > 0 {
		n := len(acc)
		srcs, keys, rks, sids, files, flags := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		digests, hashes := make([][]byte, n), make([][]byte, n)
		pos, recs := make([]int64, n), make([]int64, n)
		for j, i := range acc {
			r, res := in.Records[i], in.Results[i]
			srcs[j], keys[j], rks[j], sids[j], files[j] = r.Source, r.Key, r.ReplayKey, res.SessionID, r.File
			flags[j] = strings.Join(r.Flags, ",")
			digests[j], hashes[j] = r.Digest[:], res.EntryHash[:]
			pos[j], recs[j] = res.Position, r.Record
		}
		if n >= copyMin {
			// COPY cannot join the pipeline: it goes first, on its own.
			_, err := tx.CopyFrom(ctx, pgx.Identifier{"ingest_records"}, ingestColumns, pgx.CopyFromSlice(n, func(j int) ([]any, error) {
				var rk any
				if rks[j] != "" {
					rk = rks[j]
				}
				fl := in.Records[acc[j]].Flags
				if fl == nil {
					fl = []string{}
				}
				return []any{srcs[j], keys[j], rk, digests[j], sids[j], pos[j], hashes[j], fl, files[j], recs[j], now}, nil
			}))
			if err != nil {
				if uniqueViolation(err) {
					return err // a key is stored already: re-plan with lookups
				}
				return fmt.Errorf("couldn't record ingested keys: %w", err)
			}
		} else {
			b.Queue(q.InsertIngestRecords, srcs, keys, rks, digests, sids, pos, hashes, files, flags, recs, now)
		}
	}
	srcs, err := s.SourceRows(in)
	if err != nil {
		return err
	}
	if n := len(srcs); n >= copyMin {
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"source_records"}, sourceColumns, pgx.CopyFromSlice(n, func(j int) ([]any, error) {
			return []any{srcs[j].SessionID, srcs[j].Position, srcs[j].SHA256, srcs[j].Record, now}, nil
		}))
		if err != nil {
			return fmt.Errorf("couldn't store source records: %w", err)
		}
	} else if n > 0 {
		sids, pos, sums, recs := make([]string, n), make([]int64, n), make([][]byte, n), make([][]byte, n)
		for j, src := range srcs {
			sids[j], pos[j], sums[j], recs[j] = src.SessionID, src.Position, src.SHA256, src.Record
		}
		b.Queue(q.InsertSources, sids, pos, sums, recs, now)
	}
	if qs := in.Quarantined(); len(qs) > 0 {
		n := len(qs)
		srcs, keys, files, reasons, details := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		recs := make([]int64, n)
		raws := make([][]byte, n)
		for j, i := range qs {
			r, res := in.Records[i], in.Results[i]
			srcs[j], keys[j], files[j], reasons[j], details[j] = r.Source, r.Key, r.File, res.Reason, strings.ToValidUTF8(strings.ReplaceAll(res.Detail, "\x00", ""), "\uFFFD")
			recs[j], raws[j] = r.Record, r.Raw
			if raws[j] == nil {
				raws[j] = []byte{}
			}
		}
		b.Queue(q.InsertQuarantine, srcs, keys, files, recs, reasons, details, raws, now)
	}
	if b.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		if uniqueViolation(err) {
			return err // a concurrent ingester stored a key first: re-plan
		}
		return fmt.Errorf("couldn't record ingested keys: %w", err)
	}
	return nil
}

// splitKeys returns the sources and the keys of keys, as the two arrays
// the key queries take.
func splitKeys(keys []plan.IngestKey) (srcs, ks []string) {
	srcs, ks = make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		srcs[i], ks[i] = k.Source, k.Key
	}
	return srcs, ks
}

// ParallelWriters says how many ingest transactions on distinct sessions
// the ingest package runs at once (ingest.ParallelStore): two, the cores
// this project's machines have. Each takes its own connection and its own
// sessions' locks, so they do not wait for each other.
func (s *Store) ParallelWriters() int { return 2 }
