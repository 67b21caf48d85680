package sqlstore

import (
	"context"
	"fmt"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
)

// The reads of ingested and quarantined records (ledger.IngestStore); the
// ingest itself is the driver's.

// IngestedByKey implements ledger.IngestStore.
func (s *Store) IngestedByKey(ctx context.Context, source, key string) (ledger.IngestResult, error) {
	r, _, err := IngestedIn(ctx, s, s.d.Reader(), source, key)
	return r, err
}

// IngestedIn looks up the ingested record (source, key) of s and its
// digest on db, a transaction of the driver's ingest or the reader. (A
// function, not a method: a driver's Store, which embeds s, does not
// offer it.)
func IngestedIn(ctx context.Context, s *Store, db Querier, source, key string) (ledger.IngestResult, acs.Hash, error) {
	r, d, err := ScanIngested(s, db.QueryRow(ctx, s.q.IngestedByKey, source, key))
	if noRows(err) {
		return r, d, fmt.Errorf("%s record %q: %w", source, key, ledger.ErrNotFound)
	}
	if err != nil {
		return r, d, fmt.Errorf("couldn't look up %s record %q: %w", source, key, err)
	}
	return r, d, nil
}

// ScanIngested scans a row of ingest_records in the column order of the
// IngestedByKey query: source, natural_key, digest, session_id, position,
// entry_hash, flags, seq, file, record, recorded_at.
func ScanIngested(s *Store, row Row) (ledger.IngestResult, acs.Hash, error) {
	var r ledger.IngestResult
	var d acs.Hash
	var digest, eh []byte
	if err := row.Scan(&r.Source, &r.Key, &digest, &r.SessionID, &r.Position, &eh, s.dl.ScanList(&r.Flags),
		&r.Seq, &r.File, &r.Record, s.dl.ScanTime(&r.At)); err != nil {
		return r, d, err
	}
	copy(d[:], digest)
	copy(r.EntryHash[:], eh)
	r.Status = ledger.IngestAccepted
	r.At = r.At.UTC()
	return r, d, nil
}

// Quarantined implements ledger.IngestStore.
func (s *Store) Quarantined(ctx context.Context, f ledger.IngestFilter) ([]ledger.Quarantined, error) {
	return listRows(ctx, s, "couldn't list quarantined records", s.q.Quarantined, []any{f.After, f.Source, ledger.PageSize(f.Limit)}, func(r Rows, q *ledger.Quarantined) error {
		err := r.Scan(&q.Seq, &q.Source, &q.Key, &q.File, &q.Record, &q.Reason, &q.Detail, &q.Raw, s.dl.ScanTime(&q.At))
		q.At = q.At.UTC()
		return err
	})
}

// Flagged implements ledger.IngestStore.
func (s *Store) Flagged(ctx context.Context, flag string, f ledger.IngestFilter) ([]ledger.IngestResult, error) {
	return listRows(ctx, s, "couldn't list records flagged "+flag, s.q.Flagged, []any{flag, f.After, f.Source, ledger.PageSize(f.Limit)}, func(r Rows, res *ledger.IngestResult) error {
		var err error
		*res, _, err = ScanIngested(s, r)
		return err
	})
}
