package guardian_test

import (
	"context"
	"testing"

	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/ledger"
)

// TestHeadMovedUnderGuardian: a Guardian's append is a compare-and-swap on
// the head it decided against. Two Guardians serve one session over one
// ledger (two replicas, or a second process writing under the same
// keys); a step decided against a head the other one has since moved is
// answered with a signed CHAIN_MISMATCH (-32007) and writes nothing, never
// chained silently onto the entry it did not see. The Guardian then reads
// the head again, so its next step is decided, and chained, against it.
func TestHeadMovedUnderGuardian(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		s, tps, a := newReplicas(t, kind)
		tp1, tp2 := tps[0], tps[1]
		a.shakeHands(t, tp1, tp2)
		first := decode(t, tp1.send(t, a.envelope(t, "steps/toolCallRequest", toolCall("read_file"), nil)))
		if first.decision() != "allow" {
			t.Fatalf("first step: %s", first.raw)
		}
		stale := decode(t, tp2.send(t, a.envelope(t, "steps/toolCallRequest", toolCall("read_file"), nil)))
		hmacChecker(t, a.sessionID, stale.raw)
		mustError(t, stale, -32007, "chain_mismatch", "decided against no session, the ledger holds length 1, head "+first.str("chain_hash"))
		if es := verifyStoredChain(t, s.store, a.sessionID, first.str("chain_hash")); len(es) != 1 {
			t.Fatalf("%d entries stored after the refused step, want 1", len(es))
		}
		// The refused Guardian has read the head again.
		second := decode(t, tp2.send(t, a.envelope(t, "steps/toolCallRequest", toolCall("read_file"), nil)))
		if second.decision() != "allow" {
			t.Fatalf("step after the mismatch: %s", second.raw)
		}
		// Now the first Guardian is behind.
		mustError(t, decode(t, tp1.send(t, a.envelope(t, "steps/toolCallRequest", toolCall("read_file"), nil))),
			-32007, "chain_mismatch", "decided against length 1")
		if es := verifyStoredChain(t, s.store, a.sessionID, second.str("chain_hash")); len(es) != 2 {
			t.Fatalf("%d entries stored, want 2", len(es))
		}
	})
}

// TestGuardianRefusesExternalSession: a session created through the plain
// append API (or ingest) is not the Guardian's to sign: its handshake is
// refused with SESSION_REFUSED, and nothing is appended to it.
func TestGuardianRefusesExternalSession(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		s := newSetup(t, kind, nil)
		tp := newHTTP(t, s.g)
		a := newAgent(t, mustKeys(t).hmac, s.clock.Now)
		entry := []byte(`{"entry_id":"e-0","step_id":"x-0","step_type":"steps/sessionStart","timestamp":"2026-03-14T15:00:00Z"}`)
		if _, err := s.store.Append(context.Background(), ledger.Record{SessionID: a.sessionID, AgentID: a.agentID, Entry: entry}); err != nil {
			t.Fatal(err)
		}
		r := decode(t, tp.send(t, a.envelope(t, guardian.MethodHello, a.hello(t, nil), nil)))
		mustError(t, r, -32000, guardian.ReasonForeignSession, "written outside this Guardian")
		if se, err := s.store.Session(context.Background(), a.sessionID); err != nil || se.Length != 1 || se.Writer != ledger.WriterExternal {
			t.Fatalf("session after the refused handshake: %+v, %v", se, err)
		}
	})
}
