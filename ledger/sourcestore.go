package ledger

import (
	"context"
	"errors"
	"fmt"
)

// Payloads are what a store keeps beside an entry, committed to by a hash
// in the entry but not inside it, so that they can be erased while every
// hash and proof still verifies (docs/storage.md, "Payloads"): a Guardian
// step's request params (its entry's request_hash) and an ingested
// record's exact source bytes (its entry's source_sha256).
const (
	PayloadParams = "params"
	PayloadSource = "source"
)

// SourceReader reads the source records stored beside ingested entries.
type SourceReader interface {
	// Source returns the exact source bytes of the record an ingested
	// entry at position of a session was made from. Erased ones are an
	// *ErasedError (matching ErrErased) carrying the erasure; an entry
	// with no stored source (not ingested, or ingested before sources
	// were kept apart, with its source_record inline) is ErrNotFound.
	Source(ctx context.Context, sessionID string, position int64) ([]byte, error)
}

// SourceEraser erases the source records stored beside ingested entries.
type SourceEraser interface {
	// EraseSource erases the source record stored beside a session's
	// entry at position, in one transaction: it records the erasure
	// (reason must not be blank; who and when with it) and deletes the
	// record, and returns the erasure. The entry, with its
	// source_sha256, stays byte for byte, so the chain and every proof
	// over it still verify. It returns an error matching ErrNotFound,
	// naming the session and position, when no source is stored there
	// and never was, and an *ErasedError naming the earlier erasure when
	// it was already erased; either way it writes nothing.
	EraseSource(ctx context.Context, sessionID string, position int64, reason, by string) (Erasure, error)
}

// PayloadReader reads what a session keeps beside its entries, a range
// of positions at a time, for evidence bundles and verification.
type PayloadReader interface {
	// Payloads returns the state of the payloads stored beside the
	// session's entries at positions from (inclusive) to to (exclusive),
	// by position then payload, only for positions where something is
	// stored or an erasure is recorded. Params bytes are read only with
	// withParams (Payload.Bytes stays nil otherwise); source bytes always.
	// So that a reader's memory stays bounded, it stops at a position
	// once it holds more than PayloadReadBudget bytes: through is the
	// first position it did not cover (to when it read the whole range,
	// always more than from).
	Payloads(ctx context.Context, sessionID string, from, to int64, withParams bool) (ps []Payload, through int64, err error)
}

// PayloadReadBudget is about the most payload bytes one Payloads call
// holds: it stops at the first position boundary past it (one position's
// payloads are always read whole).
const PayloadReadBudget = 8 << 20

// Payload is the state of one payload beside an entry: stored (Bytes, or
// nil for params read without their bytes) or erased (Erasure set).
type Payload struct {
	Position int64
	// Kind is PayloadParams or PayloadSource.
	Kind    string
	Bytes   []byte
	Erasure *Erasure
}

// ErrSourceOpen is matched by the error of a source record that does not
// decrypt or that no longer hashes to the source_sha256 stored with it.
var ErrSourceOpen = errors.New("source record does not open")

// SealSource is what a store writes for a source record: sealed by
// o.Params when it can seal sources (paramcrypt.Sealer can), in clear
// when o.Params is nil.
func (o Options) SealSource(sessionID string, position int64, src []byte) ([]byte, error) {
	if o.Params == nil {
		return src, nil
	}
	s, ok := o.Params.(SourceSealer)
	if !ok {
		return nil, fmt.Errorf("the params sealer %T cannot seal source records", o.Params)
	}
	b, err := s.SealSource(sessionID, position, src)
	if err != nil {
		return nil, fmt.Errorf("couldn't encrypt the source record of session %q position %d: %w", sessionID, position, err)
	}
	return b, nil
}

// OpenSource is the source bytes a stored record holds. A record stored
// in clear is returned as it is when no sealer is configured; a sealed
// one then is an error.
func (o Options) OpenSource(sessionID string, position int64, record []byte) ([]byte, error) {
	if o.Params == nil {
		if len(record) > 0 && record[0] == 0 {
			return nil, fmt.Errorf("%w: the source record of session %q position %d is encrypted and no master key is configured", ErrSourceOpen, sessionID, position)
		}
		return record, nil
	}
	s, ok := o.Params.(SourceSealer)
	if !ok {
		return nil, fmt.Errorf("the params sealer %T cannot open source records", o.Params)
	}
	b, err := s.OpenSource(sessionID, position, record)
	if err != nil {
		return nil, fmt.Errorf("%w: session %q position %d: %v", ErrSourceOpen, sessionID, position, err)
	}
	return b, nil
}

// SourceSealer seals source records as ParamsSealer seals params, under
// labels of their own, so that a sealed params record moved into the
// source table (or back) does not open.
type SourceSealer interface {
	SealSource(sessionID string, position int64, src []byte) ([]byte, error)
	OpenSource(sessionID string, position int64, record []byte) ([]byte, error)
}
