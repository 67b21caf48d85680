package guardian_test

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/guardian"
)

// TestHybridSignedRequest: an agent signing its requests with the hybrid
// ML-DSA-65+ECDSA-P256 (§10.1, §10.2) is served end to end, and the
// Guardian accepts a request only when both components verify: a value
// whose ML-DSA-65 or ECDSA component belongs to another request is
// SIGNATURE_INVALID.
func TestHybridSignedRequest(t *testing.T) {
	k := mustKeys(t)
	agentKey, err := sig.GenerateKey(sig.MLDSA65ECDSAP256, "agent-hybrid")
	if err != nil {
		t.Fatal(err)
	}
	ks, err := sig.NewKeySet(k.hmac.Public(), agentKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	s := newSetup(t, "sqlite", func(c *guardian.Config) { c.Keys = ks; c.ResponseKey = k.hybrid })
	tp := newHTTP(t, s.g)
	a := newAgent(t, agentKey, s.clock.Now)
	check := asymChecker(k.hybrid)
	hello := decode(t, tp.send(t, a.envelope(t, guardian.MethodHello, a.hello(t, nil), nil)))
	mustResult(t, hello)
	check(t, a.sessionID, hello.raw)
	r := decode(t, tp.send(t, a.envelope(t, "steps/sessionStart", map[string]any{}, nil)))
	if r.decision() != "allow" {
		t.Fatalf("hybrid-signed sessionStart: %s", r.raw)
	}
	check(t, a.sessionID, r.raw)

	value := func(body []byte) (pq, classical []byte) {
		var env map[string]any
		if err := json.Unmarshal(body, &env); err != nil {
			t.Fatal(err)
		}
		v, err := base64.StdEncoding.DecodeString(params(env)["signature"].(map[string]any)["value"].(string))
		if err != nil {
			t.Fatal(err)
		}
		pq, classical, err = sig.DecodeHybrid(v)
		if err != nil {
			t.Fatal(err)
		}
		return pq, classical
	}
	for _, c := range []struct {
		name string
		mix  func(pqA, cA, pqB, cB []byte) []byte
	}{
		{"classical component of another request", func(pqA, _, _, cB []byte) []byte { return sig.EncodeHybrid(pqA, cB) }},
		{"ML-DSA-65 component of another request", func(_, cA, pqB, _ []byte) []byte { return sig.EncodeHybrid(pqB, cA) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			bodyA := a.envelope(t, "steps/toolCallRequest", toolCall("read_file"), nil)
			bodyB := a.envelope(t, "steps/toolCallRequest", toolCall("bash"), nil)
			pqA, cA := value(bodyA)
			pqB, cB := value(bodyB)
			mixed := resign(t, bodyA, func(env map[string]any) {
				params(env)["signature"].(map[string]any)["value"] = base64.StdEncoding.EncodeToString(c.mix(pqA, cA, pqB, cB))
			}, nil)
			mustError(t, decode(t, tp.send(t, mixed)), -32004, "signature_mismatch", "")
			// The request signed whole is accepted.
			if r := decode(t, tp.send(t, bodyA)); r.decision() != "allow" {
				t.Fatalf("the hybrid-signed request itself: %s", r.raw)
			}
		})
	}
}
