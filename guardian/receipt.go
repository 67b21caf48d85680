package guardian

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/acsledger/acsledger/acs/rpcerr"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/ledger"
)

// MethodReceipt is acsledger's method for the agent's copy of its proof
// (docs/receipts.md): an agent asks, with the credentials of its session
// (the key bound at handshake), for the receipt of one of that session's
// steps. It is not an ACS hook and never enters the chain; it sits under
// system/, the namespace ACS leaves to transport and control methods, with
// a name of its own so that no future ACS method collides with it
// (docs/conformance.md, "Divergences").
const MethodReceipt = "system/acsledger/receipt"

// ErrReceiptPending is what a ReceiptSource returns (wrapped) for a step
// no signed checkpoint covers yet.
var ErrReceiptPending = errors.New("the step is not yet in a signed checkpoint")

// ReceiptSource issues the receipts MethodReceipt answers with. Receipt
// returns the receipt of the entry of sessionID whose step_id is stepID,
// or, when stepID is "", of the entry at position. It returns an error
// wrapping ledger.ErrNotFound when the session has no such entry, and one
// wrapping ErrReceiptPending when no signed checkpoint covers it yet;
// RetryAfter is how long to wait then.
type ReceiptSource interface {
	Receipt(ctx context.Context, sessionID, stepID string, position int64) ([]byte, error)
	RetryAfter() time.Duration
}

// receiptPayload is the payload of a MethodReceipt request: exactly one
// of step_id (the request_id of one of the session's steps) and position.
type receiptPayload struct {
	StepID   *string `json:"step_id"`
	Position *int64  `json:"position"`
}

// receipt answers MethodReceipt. Only the session's own key may ask, and
// only for that session's entries: the session is the one the request is
// signed for, never named in the payload.
func (g *Guardian) receipt(ctx context.Context, req *request) []byte {
	if g.cfg.Receipts == nil {
		return g.errorResponse(req.id, refuse(rpcerr.MethodNotFound, "method_not_found",
			fmt.Sprintf("method %q: this Guardian issues no receipts (it runs without a Merkle log)", req.method), "method", req.method), nil)
	}
	s, refusal := g.sessionOf(req, " with this Guardian; receipts are given to the session's own key")
	if s == nil {
		return refusal
	}
	if e := g.checkFresh(req); e != nil {
		return g.errorResponse(req.id, e, s.signer)
	}
	var p receiptPayload
	dec := json.NewDecoder(bytes.NewReader(req.payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return g.errorResponse(req.id, invalidParam("params.payload", "must be {\"step_id\": ID} or {\"position\": N}: "+err.Error()), s.signer)
	}
	stepID, pos := "", int64(-1)
	switch {
	case (p.StepID == nil) == (p.Position == nil):
		return g.errorResponse(req.id, invalidParam("params.payload", "must name exactly one of step_id and position"), s.signer)
	case p.StepID != nil && *p.StepID == "":
		return g.errorResponse(req.id, invalidParam("params.payload.step_id", "must not be empty"), s.signer)
	case p.StepID != nil:
		stepID = *p.StepID
	case *p.Position < 0:
		return g.errorResponse(req.id, invalidParam("params.payload.position", "must be 0 or more"), s.signer)
	default:
		pos = *p.Position
	}
	doc, err := g.cfg.Receipts.Receipt(ctx, s.id, stepID, pos)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		what := fmt.Sprintf("position %d", pos)
		if stepID != "" {
			what = fmt.Sprintf("step_id %q", stepID)
		}
		return g.errorResponse(req.id, refuse(rpcerr.InvalidParams, "no_such_step",
			fmt.Sprintf("session %s has no entry at %s", s.id, what)), s.signer)
	case errors.Is(err, ErrReceiptPending):
		wait := g.cfg.Receipts.RetryAfter()
		return g.errorResponse(req.id, refuse(rpcerr.InternalError, "not_anchored",
			fmt.Sprintf("%v; retry in %d ms", err, wait.Milliseconds()), "retry_after_ms", wait.Milliseconds()), s.signer)
	case err != nil:
		g.cfg.Logger.Error("guardian: couldn't issue a receipt", "session_id", s.id, "err", err)
		return g.errorResponse(req.id, refuse(rpcerr.InternalError, "internal", "the receipt could not be issued"), s.signer)
	}
	res := acsResult{Type: "final", ACSVersion: Version, RequestID: req.requestID, Decision: Allow,
		Payload: map[string]string{"receipt": string(doc)}}
	return g.seal(response{JSONRPC: "2.0", ID: req.id, Result: res}, sig.Result, s.signer)
}
