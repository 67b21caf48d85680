package sqlstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/internal/plan"
)

// Source implements ledger.SourceReader.
func (s *Store) Source(ctx context.Context, sessionID string, position int64) ([]byte, error) {
	var b []byte
	err := s.d.Reader().QueryRow(ctx, s.q.SourceRecord, sessionID, position).Scan(&b)
	if noRows(err) {
		e, err := s.readSourceErasure(ctx, s.d.Reader(), sessionID, position)
		if err != nil {
			return nil, err
		}
		if e != nil {
			return nil, &ledger.ErasedError{Erasure: *e}
		}
		return nil, fmt.Errorf("source record for session %q position %d: %w", sessionID, position, ledger.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("couldn't read the source record of session %q position %d: %w", sessionID, position, err)
	}
	if b == nil {
		b = []byte{} // SQLite reads an empty blob as NULL
	}
	return s.opts.OpenSource(sessionID, position, b)
}

// EraseSource implements ledger.SourceEraser, as EraseParams erases
// params: the erasure is recorded first, then the record deleted, in one
// transaction that the driver prepares (Driver.BeginErase).
func (s *Store) EraseSource(ctx context.Context, sessionID string, position int64, reason, by string) (ledger.Erasure, error) {
	e := ledger.Erasure{SessionID: sessionID, Position: position, Payload: ledger.PayloadSource, ErasedAt: s.opts.Clock()().UTC(), Reason: reason, ErasedBy: by}
	if err := e.Check(); err != nil {
		return ledger.Erasure{}, err
	}
	err := s.erasePayload(ctx, &e, erasing{
		insert: s.q.InsertSourceErasure, delete: s.q.DeleteSourceRecord,
		what: "the source record", rows: "source records", notErasable: s.sourceNotErasable,
	})
	if errors.Is(err, errNoSource) {
		// Read outside the eraser's transaction: the eraser role may not
		// read entries.
		var exists bool
		if qerr := s.d.Reader().QueryRow(ctx, s.q.EntryExists, sessionID, position).Scan(&exists); qerr != nil {
			return ledger.Erasure{}, fmt.Errorf("couldn't erase the source record of session %q position %d: couldn't look up the entry: %w", sessionID, position, qerr)
		}
		if !exists {
			return ledger.Erasure{}, fmt.Errorf("couldn't erase the source record of session %q position %d: no entry is stored there: %w", sessionID, position, ledger.ErrNotFound)
		}
	}
	if err != nil {
		return ledger.Erasure{}, fmt.Errorf("couldn't erase the source record of session %q position %d: %w", sessionID, position, err)
	}
	e.ErasedAt = e.ErasedAt.UTC()
	return e, nil
}

// errNoSource: no source record is stored at the position, and none was
// erased there.
var errNoSource = fmt.Errorf("%w: the entry has no source record stored beside it (not ingested, or ingested with its source inline)", ledger.ErrNotFound)

// sourceNotErasable explains why InsertSourceErasure found nothing to
// erase: an *ledger.ErasedError if an erasure is recorded, else
// errNoSource.
func (s *Store) sourceNotErasable(ctx context.Context, tx Querier, sessionID string, position int64) error {
	e, err := s.readSourceErasure(ctx, tx, sessionID, position)
	if err != nil {
		return err
	}
	if e != nil {
		return &ledger.ErasedError{Erasure: *e}
	}
	return errNoSource
}

func (s *Store) readSourceErasure(ctx context.Context, db Querier, sessionID string, position int64) (*ledger.Erasure, error) {
	e := ledger.Erasure{SessionID: sessionID, Position: position, Payload: ledger.PayloadSource}
	err := db.QueryRow(ctx, s.q.SourceErasure, sessionID, position).Scan(s.dl.ScanTime(&e.ErasedAt), &e.Reason, &e.ErasedBy)
	if noRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("couldn't read the source erasure of session %q position %d: %w", sessionID, position, err)
	}
	e.ErasedAt = e.ErasedAt.UTC()
	return &e, nil
}

// Payloads implements ledger.PayloadReader in one query over the range,
// read until the budget is spent.
func (s *Store) Payloads(ctx context.Context, sessionID string, from, to int64, withParams bool) ([]ledger.Payload, int64, error) {
	wp := int64(0)
	if withParams {
		wp = 1
	}
	rows, err := s.d.Reader().Query(ctx, s.q.Payloads, sessionID, from, to, wp)
	if err != nil {
		return nil, 0, fmt.Errorf("couldn't read the payloads of session %q positions %d-%d: %w", sessionID, from, to-1, err)
	}
	defer rows.Close()
	var out []ledger.Payload
	held := 0
	for rows.Next() {
		var p ledger.Payload
		var kind int64
		var b []byte
		var at time.Time
		var reason, by string
		if err := rows.Scan(&p.Position, &kind, &b, NullTime{&at}, &reason, &by); err != nil {
			return nil, 0, fmt.Errorf("couldn't read the payloads of session %q: %w", sessionID, err)
		}
		if held > ledger.PayloadReadBudget && p.Position > out[len(out)-1].Position {
			// Past the budget, at a position boundary: the caller
			// reads on from here.
			return out, p.Position, nil
		}
		held += len(b)
		p.Kind = ledger.PayloadParams
		if kind >= 2 {
			p.Kind = ledger.PayloadSource
		}
		switch kind {
		case 0:
			if withParams {
				if b == nil {
					b = []byte{}
				}
				if p.Bytes, err = s.opts.OpenParams(sessionID, p.Position, b); err != nil {
					return nil, 0, err
				}
			}
		case 2:
			if b == nil {
				b = []byte{}
			}
			if p.Bytes, err = s.opts.OpenSource(sessionID, p.Position, b); err != nil {
				return nil, 0, err
			}
		default:
			p.Erasure = &ledger.Erasure{SessionID: sessionID, Position: p.Position, Payload: p.Kind, ErasedAt: at, Reason: reason, ErasedBy: by}
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("couldn't read the payloads of session %q: %w", sessionID, err)
	}
	return out, to, nil
}

// SourceRow is one source record to store beside an ingested entry.
type SourceRow struct {
	SessionID string
	Position  int64
	SHA256    []byte
	// Record is the source bytes as stored: sealed when the store seals.
	Record []byte
}

// SourceRows returns the source records of the accepted records of in
// that keep theirs (ledger.IngestRecord.KeepSource), sealed for their
// entries: the driver writes them in the batch's transaction.
func (s *Store) SourceRows(in *plan.Ingest) ([]SourceRow, error) {
	var out []SourceRow
	for _, i := range in.Accepted() {
		r, res := in.Records[i], in.Results[i]
		if !r.KeepSource {
			continue
		}
		raw := r.Raw
		if raw == nil {
			raw = []byte{}
		}
		sum := sha256.Sum256(raw)
		sealed, err := s.opts.SealSource(res.SessionID, res.Position, raw)
		if err != nil {
			return nil, err
		}
		out = append(out, SourceRow{SessionID: res.SessionID, Position: res.Position, SHA256: sum[:], Record: sealed})
	}
	return out, nil
}
