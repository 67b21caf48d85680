package opapolicy_test

import (
	"testing"

	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/guardian/opapolicy"
)

// TestInputCarriesSessionState: the policy's approver_capable and deferral
// rules can only fire if the Guardian's session state reaches the engine.
func TestInputCarriesSessionState(t *testing.T) {
	for _, capable := range []bool{false, true} {
		in, err := opapolicy.BuildInput(guardian.Input{Method: "steps/toolCallRequest", Session: guardian.SessionState{
			ChainHash: "ab", Length: 3, Deferrals: 2, ApproverCapable: capable,
		}})
		if err != nil {
			t.Fatal(err)
		}
		s := in.Session
		if s.ApproverCapable == nil || *s.ApproverCapable != capable || s.Deferrals != 2 || s.Position != 3 || s.ChainHash != "ab" {
			t.Fatalf("capable=%v: engine session %+v", capable, s)
		}
	}
}
