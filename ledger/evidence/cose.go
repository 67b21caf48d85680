package evidence

import (
	"bytes"
	"context"
	"crypto"
	"errors"
	"fmt"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/verify"
)

// COSELog is a ReceiptLog that can sign COSE receipts with its Ed25519
// checkpoint key; *tlog.Log implements it.
type COSELog interface {
	ReceiptLog
	COSESigner() (crypto.Signer, []byte)
}

// COSEReceipt builds the COSE form of an entry's receipt
// (docs/receipts.md, "The COSE form"): a SCITT transparent statement,
// the COSE_Sign1 over the entry's RFC 8785 bytes carrying the RFC 9942
// receipt of its leaf in the checkpoint that first covered it (the same
// anchor as the tlog-proof form's). Errors are those of [Receipt].
func COSEReceipt(ctx context.Context, store ReceiptStore, log ReceiptLog, sessionID string, position int64) ([]byte, error) {
	e, err := receiptEntry(ctx, store, sessionID, position)
	if err != nil {
		return nil, err
	}
	a, err := firstAnchor(ctx, log, sessionID, position)
	if err != nil {
		return nil, err
	}
	cl, ok := log.(COSELog)
	if !ok {
		return nil, errors.New("this ledger's log cannot sign COSE receipts")
	}
	text, _, _ := bytes.Cut(a.Checkpoint, []byte("\n\n"))
	cp, err := verify.ParseCheckpointHead(append(text, '\n'))
	if err != nil {
		return nil, fmt.Errorf("the checkpoint of session %s position %d: %w", sessionID, position, err)
	}
	entry, err := acs.Canonicalize(FullEntry(e.Content, e.EntryHash, e.PreviousHash))
	if err != nil {
		return nil, fmt.Errorf("couldn't canonicalize the entry of session %s position %d: %w", sessionID, position, err)
	}
	key, kid := cl.COSESigner()
	return verify.FormatCOSEReceipt(&verify.COSEStatement{
		Origin: cp.Origin, SessionID: e.SessionID, Position: uint64(e.Position), Entry: entry,
		Index: a.Index, Size: cp.Size, Proof: a.Proof, Root: cp.Root,
	}, key, kid)
}
