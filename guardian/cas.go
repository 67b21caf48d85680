package guardian

import (
	"context"
	"errors"
	"fmt"

	"github.com/acsledger/acsledger/acs/rpcerr"
	"github.com/acsledger/acsledger/ledger"
)

// The Guardian's appends are compare-and-swap on the head it decided
// against, and its sessions are its own (ledger.WriterGuardian): the
// ledger refuses an append when another writer moved the head, and refuses
// any entry into a Guardian session from the plain API or ingest. A signed
// answer therefore never publishes a chain_hash over an entry the Guardian
// did not decide.

// expected is the head the session's next step is decided against. Called
// with s.mu held.
func (s *session) expected() *ledger.Head {
	h := &ledger.Head{Length: s.length}
	if s.head != nil {
		h.Hash = *s.head
	}
	return h
}

// appendRefused answers a step the ledger refused for one of the two
// reasons above, or returns nil for any other error. Nothing of the step
// was written. Called with s.mu held.
func (g *Guardian) appendRefused(ctx context.Context, req *request, s *session, err error) []byte {
	var moved *ledger.HeadMovedError
	switch {
	case errors.As(err, &moved):
		// ACS §8.6, §17.1: the Guardian cannot record the decision it
		// made, so it answers CHAIN_MISMATCH rather than chaining it onto
		// a head it never saw. The session's state is read again, so the
		// next step is decided, explicitly, against what the ledger holds.
		g.cfg.Logger.Warn("guardian: session head moved under the Guardian", "session_id", s.id, "request_id", req.requestID,
			"expected", moved.Expected.String(), "actual", moved.Actual.String())
		g.resync(ctx, s)
		return g.errorResponse(req.id, refuse(rpcerr.ChainMismatch, ReasonChainMismatch,
			fmt.Sprintf("the session's chain head moved while the step was decided: decided against %s, the ledger holds %s; nothing was recorded", moved.Expected, moved.Actual),
			"expected_length", moved.Expected.Length, "actual_length", moved.Actual.Length), s.signer)
	case errors.Is(err, ledger.ErrWriterMismatch):
		return g.errorResponse(req.id, refuse(rpcerr.SessionRefused, ReasonForeignSession,
			fmt.Sprintf("session %s was written outside this Guardian and accepts no Guardian entry; start a new session", s.id)), s.signer)
	}
	return nil
}

// ReasonForeignSession refuses a session that the plain API or ingest
// created: the Guardian never signs a chain it did not write.
const ReasonForeignSession = "session_not_guardian"

// ReasonSessionSealed refuses a handshake, and ResolveAsk refuses an
// approval (ErrSessionSealed), for a session whose chain ends in
// steps/sessionEnd.
const ReasonSessionSealed = "session_sealed"

// resync sets the session's head to the ledger's, when it can be read.
// Called with s.mu held.
func (g *Guardian) resync(ctx context.Context, s *session) {
	if stored, err := g.cfg.Store.Session(ctx, s.id); err == nil {
		head := stored.Head
		s.head, s.length = &head, stored.Length
	}
}
