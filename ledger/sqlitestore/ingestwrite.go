package sqlitestore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/internal/plan"
	"github.com/acsledger/acsledger/ledger/internal/sqlstore"
)

var _ ledger.IngestStore = (*Store)(nil)

// Ingest implements ledger.IngestStore: one write transaction per batch,
// on the store's single writer connection.
func (s *Store) Ingest(ctx context.Context, rs []ledger.IngestRecord) ([]ledger.IngestResult, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	var in *plan.Ingest
	err := s.inTxRetry(ctx, func(tx *sql.Tx) error {
		var err error
		if in, err = s.classify(ctx, tx, rs); err != nil {
			return err
		}
		p := &plan.Plan{}
		if len(in.Prepared) > 0 {
			if p, err = s.plan(ctx, tx, in.Prepared); err != nil {
				return err
			}
			if err := s.writePlan(ctx, tx, p); err != nil {
				return err
			}
		}
		in.Finish(p)
		return s.writeIngest(ctx, tx, in)
	})
	if err != nil {
		return nil, fmt.Errorf("couldn't ingest %d records: %w", len(rs), err)
	}
	return in.Results, nil
}

func (s *Store) classify(ctx context.Context, tx *sql.Tx, rs []ledger.IngestRecord) (*plan.Ingest, error) {
	keys, replayKeys := plan.IngestKeys(rs)
	stored := make(map[plan.IngestKey]ledger.IngestResult)
	digests := make(map[plan.IngestKey]acs.Hash)
	replays := make(map[plan.IngestKey]string)
	for _, k := range keys {
		r, d, err := sqlstore.IngestedIn(ctx, s.Store, &querier{tx}, k.Source, k.Key)
		if errors.Is(err, ledger.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		stored[k], digests[k] = r, d
	}
	for _, k := range replayKeys {
		var nk string
		err := tx.QueryRowContext(ctx, q.IngestedReplayKey, k.Source, k.Key).Scan(&nk)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("couldn't look up replay key %q: %w", k.Key, err)
		}
		replays[k] = nk
	}
	return plan.NewIngest(rs, stored, digests, replays, s.opts.EntryCap()), nil
}

func (s *Store) writeIngest(ctx context.Context, tx *sql.Tx, in *plan.Ingest) error {
	now := s.opts.Clock()().UnixMicro()
	for _, i := range in.Accepted() {
		r, res := in.Records[i], in.Results[i]
		out, err := tx.ExecContext(ctx, q.InsertIngestRecord, r.Source, r.Key, r.ReplayKey, r.Digest[:],
			res.SessionID, res.Position, res.EntryHash[:], r.File, r.Record, now)
		if err != nil {
			return fmt.Errorf("couldn't record %s record %q: %w", r.Source, r.Key, err)
		}
		seq, err := out.LastInsertId()
		if err != nil {
			return err
		}
		for _, f := range r.Flags {
			if _, err := tx.ExecContext(ctx, q.InsertIngestFlag, seq, f); err != nil {
				return fmt.Errorf("couldn't record flag %s of %s record %q: %w", f, r.Source, r.Key, err)
			}
		}
	}
	srcs, err := s.SourceRows(in)
	if err != nil {
		return err
	}
	for _, src := range srcs {
		if _, err := tx.ExecContext(ctx, q.InsertSource, src.SessionID, src.Position, src.SHA256, src.Record, now); err != nil {
			return fmt.Errorf("couldn't store the source record of session %q position %d: %w", src.SessionID, src.Position, err)
		}
	}
	for _, i := range in.Quarantined() {
		r, res := in.Records[i], in.Results[i]
		raw := r.Raw
		if raw == nil {
			raw = []byte{}
		}
		sum := sha256.Sum256(raw)
		if _, err := tx.ExecContext(ctx, q.InsertQuarantine, r.Source, r.Key, r.File, r.Record,
			res.Reason, res.Detail, raw, sum[:], now); err != nil {
			return fmt.Errorf("couldn't quarantine record %d of %s: %w", r.Record, r.File, err)
		}
	}
	return nil
}
