package guardian

import (
	"context"
	"errors"
	"fmt"

	"github.com/acsledger/acsledger/acs/rpcerr"
	"github.com/acsledger/acsledger/ledger"
)

// Freshness (ACS §10.3): a request is accepted once, within the skew
// window. checkFresh refuses a timestamp outside the window; a request_id
// or nonce the session has already seen is refused by the ledger's durable
// history (recordRequest, or the append itself) and, before the policy
// runs, by the session's in-memory seenSet.

// checkFresh enforces the skew window of ACS §10.3.
func (g *Guardian) checkFresh(req *request) *rpcerr.Error {
	now := g.cfg.Clock()
	skew := now.Sub(req.timestamp)
	if skew < 0 {
		skew = -skew
	}
	if skew > g.cfg.SkewWindow {
		return refuse(rpcerr.TimestampOutOfWindow, "timestamp_out_of_window",
			fmt.Sprintf("timestamp %s is %s away from the Guardian's clock %s; the window is %s",
				req.timestamp.UTC().Format(timeFormat), skew.Round(timeRound), now.UTC().Format(timeFormat), g.cfg.SkewWindow),
			"skew_window_ms", g.cfg.SkewWindow.Milliseconds())
	}
	return nil
}

// recordRequest enforces request_id and nonce uniqueness within the session
// (ACS §10.3) through the ledger's durable history of seen requests. It returns
// the refusal of a request seen before, or the store's error when the history could not be
// written.
func (g *Guardian) recordRequest(ctx context.Context, req *request) (*rpcerr.Error, error) {
	err := g.cfg.Store.RecordRequest(ctx, req.sessionID, req.requestID, req.nonce, g.cfg.Clock())
	switch {
	case err == nil:
		return nil, nil
	case errors.Is(err, ledger.ErrReplay):
		return refuseSeenRequest(req), nil
	default:
		return nil, fmt.Errorf("couldn't record request %s of session %s: %w", req.requestID, req.sessionID, err)
	}
}

// refuseSeenRequest is the answer to a request whose request_id or nonce its
// session has already seen.
func refuseSeenRequest(req *request) *rpcerr.Error {
	what := fmt.Sprintf("request_id %s", req.requestID)
	if req.nonce != "" {
		what += " or its nonce"
	}
	return refuse(rpcerr.ReplayDetected, "replay_detected",
		fmt.Sprintf("session %s has already seen %s", req.sessionID, what), "request_id", req.requestID)
}

// seenSet is the in-memory part of a session's seen-request history: the
// request_ids and nonces this Guardian has recorded for it. It only saves
// repeated requests a trip to the ledger and a policy evaluation; the ledger's
// history is the authority (it survives restarts).
type seenSet struct {
	ids    map[string]struct{}
	nonces map[string]struct{}
}

// maxSeen bounds a session's set; past it, the set starts over and the
// ledger alone catches older repeats.
const maxSeen = 1 << 16

func (s *seenSet) has(requestID, nonce string) bool {
	if _, ok := s.ids[requestID]; ok {
		return true
	}
	_, ok := s.nonces[nonce]
	return ok && nonce != ""
}

func (s *seenSet) add(requestID, nonce string) {
	if s.ids == nil || len(s.ids) >= maxSeen {
		s.ids, s.nonces = make(map[string]struct{}), make(map[string]struct{})
	}
	s.ids[requestID] = struct{}{}
	if nonce != "" {
		s.nonces[nonce] = struct{}{}
	}
}
