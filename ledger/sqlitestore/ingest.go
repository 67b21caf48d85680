package sqlitestore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/internal/plan"
	"github.com/acsledger/acsledger/ledger/internal/sqlq"
)

//go:embed ingest.sql
var ingestSQL string

// ingestQueries are ingest.sql's named queries, checked at start as the
// store's own (sqlq.Load).
type ingestQueries struct {
	IngestedKey, IngestedReplayKey, IngestFlags, InsertIngestRecord, InsertIngestFlag, InsertQuarantine, Quarantined, Flagged string
}

var iq = sqlq.Load[ingestQueries](ingestSQL)

var _ ledger.IngestStore = (*Store)(nil)

// Ingest implements ledger.IngestStore: one write transaction per batch,
// on the store's single writer connection.
func (s *Store) Ingest(ctx context.Context, rs []ledger.IngestRecord) ([]ledger.IngestResult, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	for attempt := 0; ; attempt++ {
		var in *plan.Ingest
		err := s.inTx(ctx, func(tx *sql.Tx) error {
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
		if errors.Is(err, errHeadMoved) && attempt < 10 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("couldn't ingest %d records: %w", len(rs), err)
		}
		return in.Results, nil
	}
}

func (s *Store) classify(ctx context.Context, tx *sql.Tx, rs []ledger.IngestRecord) (*plan.Ingest, error) {
	keys, replayKeys := plan.IngestKeys(rs)
	stored := make(map[plan.IngestKey]ledger.IngestResult)
	digests := make(map[plan.IngestKey]acs.Hash)
	replays := make(map[plan.IngestKey]string)
	for _, k := range keys {
		r, d, err := ingestedByKey(ctx, tx, k.Source, k.Key)
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
		err := tx.QueryRowContext(ctx, iq.IngestedReplayKey, k.Source, k.Key).Scan(&nk)
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
		out, err := tx.ExecContext(ctx, iq.InsertIngestRecord, r.Source, r.Key, r.ReplayKey, r.Digest[:],
			res.SessionID, res.Position, res.EntryHash[:], r.File, r.Record, now)
		if err != nil {
			return fmt.Errorf("couldn't record %s record %q: %w", r.Source, r.Key, err)
		}
		seq, err := out.LastInsertId()
		if err != nil {
			return err
		}
		for _, f := range r.Flags {
			if _, err := tx.ExecContext(ctx, iq.InsertIngestFlag, seq, f); err != nil {
				return fmt.Errorf("couldn't record flag %s of %s record %q: %w", f, r.Source, r.Key, err)
			}
		}
	}
	for _, i := range in.Quarantined() {
		r, res := in.Records[i], in.Results[i]
		raw := r.Raw
		if raw == nil {
			raw = []byte{}
		}
		sum := sha256.Sum256(raw)
		if _, err := tx.ExecContext(ctx, iq.InsertQuarantine, r.Source, r.Key, r.File, r.Record,
			res.Reason, res.Detail, raw, sum[:], now); err != nil {
			return fmt.Errorf("couldn't quarantine record %d of %s: %w", r.Record, r.File, err)
		}
	}
	return nil
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func ingestedByKey(ctx context.Context, db queryer, source, key string) (ledger.IngestResult, acs.Hash, error) {
	var r ledger.IngestResult
	var d acs.Hash
	var digest, eh []byte
	var at int64
	err := db.QueryRowContext(ctx, iq.IngestedKey, source, key).Scan(&r.Source, &r.Key, &digest, &r.SessionID, &r.Position, &eh, &r.Seq, &r.File, &r.Record, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return r, d, fmt.Errorf("%s record %q: %w", source, key, ledger.ErrNotFound)
	}
	if err != nil {
		return r, d, fmt.Errorf("couldn't look up %s record %q: %w", source, key, err)
	}
	copy(d[:], digest)
	copy(r.EntryHash[:], eh)
	r.Status, r.At = ledger.IngestAccepted, time.UnixMicro(at).UTC()
	if r.Flags, err = flagsOf(ctx, db, r.Seq); err != nil {
		return r, d, err
	}
	return r, d, nil
}

func flagsOf(ctx context.Context, db queryer, seq int64) ([]string, error) {
	rows, err := db.QueryContext(ctx, iq.IngestFlags, seq)
	if err != nil {
		return nil, fmt.Errorf("couldn't read flags: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var f string
		if err := rows.Scan(&f); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// IngestedByKey implements ledger.IngestStore.
func (s *Store) IngestedByKey(ctx context.Context, source, key string) (ledger.IngestResult, error) {
	r, _, err := ingestedByKey(ctx, s.read, source, key)
	return r, err
}

// Quarantined implements ledger.IngestStore.
func (s *Store) Quarantined(ctx context.Context, f ledger.IngestFilter) ([]ledger.Quarantined, error) {
	rows, err := s.read.QueryContext(ctx, iq.Quarantined, f.After, f.Source, f.Source, ledger.PageSize(f.Limit))
	if err != nil {
		return nil, fmt.Errorf("couldn't list quarantined records: %w", err)
	}
	defer rows.Close()
	var out []ledger.Quarantined
	for rows.Next() {
		var q ledger.Quarantined
		var at int64
		if err := rows.Scan(&q.Seq, &q.Source, &q.Key, &q.File, &q.Record, &q.Reason, &q.Detail, &q.Raw, &at); err != nil {
			return nil, fmt.Errorf("couldn't list quarantined records: %w", err)
		}
		q.At = time.UnixMicro(at).UTC()
		out = append(out, q)
	}
	return out, rows.Err()
}

// Flagged implements ledger.IngestStore.
func (s *Store) Flagged(ctx context.Context, flag string, f ledger.IngestFilter) ([]ledger.IngestResult, error) {
	rows, err := s.read.QueryContext(ctx, iq.Flagged, flag, f.After, f.Source, f.Source, ledger.PageSize(f.Limit))
	if err != nil {
		return nil, fmt.Errorf("couldn't list records flagged %s: %w", flag, err)
	}
	var out []ledger.IngestResult
	for rows.Next() {
		var r ledger.IngestResult
		var digest, eh []byte
		var at int64
		if err := rows.Scan(&r.Source, &r.Key, &digest, &r.SessionID, &r.Position, &eh, &r.Seq, &r.File, &r.Record, &at); err != nil {
			rows.Close()
			return nil, fmt.Errorf("couldn't list records flagged %s: %w", flag, err)
		}
		copy(r.EntryHash[:], eh)
		r.Status, r.At = ledger.IngestAccepted, time.UnixMicro(at).UTC()
		out = append(out, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Flags, err = flagsOf(ctx, s.read, out[i].Seq); err != nil {
			return nil, err
		}
	}
	return out, nil
}
