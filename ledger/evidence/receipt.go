package evidence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/verify"
)

// ErrNotAnchored means the entry exists but no signed checkpoint covers it
// yet: the integrator has not taken it into the tree, or the checkpoint
// that does is not signed (or not yet published) yet. Asking again after
// the log's batch delay normally succeeds.
var ErrNotAnchored = errors.New("the entry is not yet in a signed checkpoint")

// ReceiptStore is what a receipt reads from the ledger: the entry (as
// Entries returns it, ledger.ErrNotFound for an unknown session) and the
// signed response stored beside it (ledger.ErrNotFound when it has none).
type ReceiptStore interface {
	Entries(ctx context.Context, sessionID string, from int64, limit int) ([]ledger.Entry, error)
	Response(ctx context.Context, sessionID string, position int64) ([]byte, error)
}

// ReceiptLog is what a receipt needs of the Merkle log; *tlog.Log
// implements it. FirstAnchorOf returns an error wrapping tlog.ErrNotFound
// while no signed checkpoint covers the entry; Timestamp returns the
// stored RFC 3161 time-stamp response of the checkpoint of a size, or an
// error wrapping tlog.ErrNotFound when it has none (yet).
type ReceiptLog interface {
	FirstAnchorOf(ctx context.Context, sessionID string, position int64) (tlog.FirstAnchor, error)
	Timestamp(ctx context.Context, size uint64) ([]byte, error)
}

var _ ReceiptLog = (*tlog.Log)(nil)

// Receipt builds the receipt of one entry (docs/receipts.md): a
// c2sp.org/tlog-proof@v1 document whose checkpoint is the one that first
// covered the entry, with its witness cosignatures, and whose extra data
// (verify.ReceiptExtra) carries the entry, its signed response when it
// has one, and the policy versions its decision cites. Nothing of any
// other entry is in it: the inclusion proof is hashes of subtrees.
//
// An unknown session or position is an error wrapping ledger.ErrNotFound;
// an entry no checkpoint covers yet, ErrNotAnchored.
func Receipt(ctx context.Context, store ReceiptStore, log ReceiptLog, sessionID string, position int64) ([]byte, error) {
	e, err := receiptEntry(ctx, store, sessionID, position)
	if err != nil {
		return nil, err
	}
	resp, err := store.Response(ctx, sessionID, position)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		resp = nil
	case err != nil:
		return nil, fmt.Errorf("couldn't read the response of session %s position %d: %w", sessionID, position, err)
	}
	a, err := firstAnchor(ctx, log, sessionID, position)
	if err != nil {
		return nil, err
	}
	token, err := checkpointToken(ctx, log, a.Checkpoint)
	if err != nil {
		return nil, fmt.Errorf("session %s position %d: %w", sessionID, position, err)
	}
	extra, err := receiptExtra(e, resp, token)
	if err != nil {
		return nil, err
	}
	return verify.FormatReceipt(extra, a.Index, a.Proof, a.Checkpoint), nil
}

// receiptEntry loads the entry at position of sessionID; an unknown
// session or position is an error wrapping ledger.ErrNotFound.
func receiptEntry(ctx context.Context, store ReceiptStore, sessionID string, position int64) (ledger.Entry, error) {
	if position < 0 {
		return ledger.Entry{}, fmt.Errorf("%w: position %d", ledger.ErrNotFound, position)
	}
	es, err := store.Entries(ctx, sessionID, position, 1)
	if err != nil {
		return ledger.Entry{}, fmt.Errorf("couldn't load session %s position %d: %w", sessionID, position, err)
	}
	if len(es) == 0 || es[0].Position != position {
		return ledger.Entry{}, fmt.Errorf("%w: session %s has no entry at position %d", ledger.ErrNotFound, sessionID, position)
	}
	return es[0], nil
}

// firstAnchor is the signed checkpoint that first covered the entry, its
// leaf index and inclusion proof; ErrNotAnchored while there is none.
func firstAnchor(ctx context.Context, log ReceiptLog, sessionID string, position int64) (tlog.FirstAnchor, error) {
	if log == nil {
		return tlog.FirstAnchor{}, fmt.Errorf("%w: this ledger runs without a Merkle log", ErrNotAnchored)
	}
	a, err := log.FirstAnchorOf(ctx, sessionID, position)
	if errors.Is(err, tlog.ErrNotFound) {
		return tlog.FirstAnchor{}, fmt.Errorf("%w: session %s position %d", ErrNotAnchored, sessionID, position)
	}
	if err != nil {
		return tlog.FirstAnchor{}, fmt.Errorf("couldn't anchor session %s position %d: %w", sessionID, position, err)
	}
	return a, nil
}

// ReceiptExtra is the extra data of the receipt of entry e with its signed
// response resp (nil when it has none), in RFC 8785 form.
func ReceiptExtra(e ledger.Entry, resp []byte) ([]byte, error) {
	return receiptExtra(e, resp, nil)
}

// checkpointToken returns the RFC 3161 TimeStampToken of the signed
// checkpoint, taken from the response the log stored for it; nil when the
// checkpoint has no time-stamp (yet): the log has no authority, or it was
// down and the checkpoint is stamped later, so a receipt asked for again
// then carries it.
func checkpointToken(ctx context.Context, log ReceiptLog, checkpoint []byte) ([]byte, error) {
	size, err := checkpointSize(checkpoint)
	if err != nil {
		return nil, err
	}
	resp, err := log.Timestamp(ctx, size)
	if errors.Is(err, tlog.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("couldn't read the time-stamp of checkpoint %d: %w", size, err)
	}
	// The stamper checked the response before storing it; it is checked
	// again so that a receipt never carries a token for another note.
	token, err := verify.TimestampToken(resp, checkpoint)
	if err != nil {
		return nil, fmt.Errorf("the stored time-stamp of checkpoint %d: %w", size, err)
	}
	return token, nil
}

func receiptExtra(e ledger.Entry, resp, token []byte) ([]byte, error) {
	x := verify.ReceiptExtra{
		Format:           verify.ReceiptFormat,
		Version:          verify.ReceiptVersion,
		SessionID:        e.SessionID,
		Position:         uint64(e.Position),
		Entry:            FullEntry(e.Content, e.EntryHash, e.PreviousHash),
		PolicyReferences: verify.EntryPolicyRefs(e.Content),
		TimestampToken:   token,
	}
	if resp != nil {
		x.Response = bytes.TrimSpace(resp)
	}
	b, err := json.Marshal(x)
	if err != nil {
		return nil, fmt.Errorf("couldn't encode the receipt of session %s position %d: %w", e.SessionID, e.Position, err)
	}
	canon, err := acs.Canonicalize(b)
	if err != nil {
		return nil, fmt.Errorf("couldn't canonicalize the receipt of session %s position %d: %w", e.SessionID, e.Position, err)
	}
	return canon, nil
}

// StepStore is a ReceiptStore that also finds an entry by its step_id
// (ledger.ChainReader.EntriesByStep).
type StepStore interface {
	ReceiptStore
	EntriesByStep(ctx context.Context, stepID, sessionID string) ([]ledger.Entry, error)
}

// StepReceipts issues receipts by session and step_id or position: what
// the Guardian's system/acsledger/receipt method (the agent's copy) and
// the API share. Pending wraps ErrNotAnchored errors with the sentinel of
// the caller's layer (the Guardian's ErrReceiptPending), so each layer
// maps its own errors; nil leaves them as they are.
type StepReceipts struct {
	Store   StepStore
	Log     ReceiptLog
	Retry   time.Duration
	Pending error
}

// Receipt returns the receipt of the entry of sessionID whose step_id is
// stepID or, when stepID is "", of the entry at position.
func (s *StepReceipts) Receipt(ctx context.Context, sessionID, stepID string, position int64) ([]byte, error) {
	if stepID != "" {
		es, err := s.Store.EntriesByStep(ctx, stepID, sessionID)
		if err != nil {
			return nil, fmt.Errorf("couldn't find step %s of session %s: %w", stepID, sessionID, err)
		}
		if len(es) == 0 {
			return nil, fmt.Errorf("%w: session %s has no step %s", ledger.ErrNotFound, sessionID, stepID)
		}
		position = es[0].Position
	}
	doc, err := Receipt(ctx, s.Store, s.Log, sessionID, position)
	if errors.Is(err, ErrNotAnchored) && s.Pending != nil {
		return nil, fmt.Errorf("%w: %v", s.Pending, err)
	}
	return doc, err
}

// RetryAfter is how long to wait after ErrNotAnchored.
func (s *StepReceipts) RetryAfter() time.Duration { return max(s.Retry, time.Second) }
