package guardian_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs/schemas"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/guardian"
)

// TestServerHello: the ServerHello carries every member ACS §4 lists, each
// with the value the configuration implies, and validates against
// handshake.json $defs/ServerHello.
func TestServerHello(t *testing.T) {
	s := newSetup(t, "sqlite", func(c *guardian.Config) {
		c.Timeout = 2 * time.Second
		c.PerMethodTimeout = map[string]time.Duration{"steps/toolCallRequest": 1500 * time.Millisecond}
		c.OnDecisionFailure = guardian.PostureDeny
		c.SkewWindow = 90 * time.Second
		c.ApproverTypes = []string{"human", "service"}
		c.RequireProvenance = true
	})
	tp := newHTTP(t, s.g)
	a := newAgent(t, mustKeys(t).hmac, s.clock.Now)
	r := decode(t, tp.send(t, a.envelope(t, guardian.MethodHello, a.hello(t, func(h map[string]any) {
		h["methods_implemented"] = []string{"steps/sessionStart", "steps/toolCallRequest", "steps/bogus", "protocols/MCP/*", "protocols/A2A/x"}
		h["profiles_supported"] = []string{"acs-core", "acs-audit", "acs-crypto", "acs-trace"}
	}), nil)))
	mustResult(t, r)
	raw, _ := json.Marshal(r.Result)
	if err := schemas.Validate(schemas.ServerHello, raw); err != nil {
		t.Fatalf("ServerHello does not match handshake.json: %v\n%s", err, raw)
	}
	var got map[string]any
	_ = json.Unmarshal(raw, &got)
	delete(got, "signature")
	want := map[string]any{
		"negotiated_version":             "0.1.0",
		"methods_evaluated":              []any{"steps/sessionStart", "steps/toolCallRequest", "protocols/MCP/*"},
		"selected_transport":             "http",
		"signature_algorithms_supported": []any{"HMAC-SHA256", "ECDSA-P256"},
		"timeout_config":                 map[string]any{"default_ms": 2000.0, "per_method_ms": map[string]any{"steps/toolCallRequest": 1500.0}},
		"on_decision_failure":            "deny",
		"on_timeout":                     "deny",
		"skew_window_ms":                 90000.0,
		"approver_types_supported":       []any{"human", "service"},
		"policy_requires_provenance":     true,
		"agbom_serializations_supported": []any{"canonical"},
		"trace_emission":                 map[string]any{"otel_enabled": false, "ocsf_enabled": false},
		"profiles_accepted":              []any{"acs-core", "acs-audit"},
	}
	for k, w := range want {
		if !reflect.DeepEqual(got[k], w) {
			t.Errorf("%s = %#v, want %#v", k, got[k], w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected member %s = %v", k, got[k])
		}
	}
}

// TestCryptoProfileNeedsMLDSA: acs-crypto is accepted only when the keys
// support what the profile requires: asymmetric response signatures made
// with ML-DSA-65 (alone or in a hybrid), and an ML-DSA-65 key among the
// request verification keys (ACS conformance, ACS-Crypto: "MUST support
// at least ML-DSA-65"). An ECDSA-only deployment is not offered it.
func TestCryptoProfileNeedsMLDSA(t *testing.T) {
	k := mustKeys(t)
	agentMLDSA, err := sig.GenerateKey(sig.MLDSA65, "agent-mldsa")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		response *sig.PrivateKey
		withPQ   bool // the verification key set holds an ML-DSA-65 key
		agentKey *sig.PrivateKey
		crypto   bool
	}{
		{"ECDSA responses", k.ecdsa, true, k.agent, false},
		{"ML-DSA-65 responses, no ML-DSA-65 request key", k.mldsa, false, k.agent, false},
		{"ML-DSA-65 responses and request key", k.mldsa, true, k.agent, true},
		{"hybrid responses and request key", k.hybrid, true, agentMLDSA, true},
		{"HMAC session", k.mldsa, true, k.hmac, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			pubs := []*sig.PublicKey{k.hmac.Public(), k.agent.Public()}
			if c.withPQ {
				pubs = append(pubs, agentMLDSA.Public())
			}
			ks, err := sig.NewKeySet(pubs...)
			if err != nil {
				t.Fatal(err)
			}
			s := newSetup(t, "sqlite", func(cfg *guardian.Config) { cfg.Keys = ks; cfg.ResponseKey = c.response })
			a := newAgent(t, c.agentKey, s.clock.Now)
			r := decode(t, newHTTP(t, s.g).send(t, a.envelope(t, guardian.MethodHello, a.hello(t, nil), nil)))
			mustResult(t, r)
			var accepted []string
			for _, p := range asSlice(r.Result["profiles_accepted"]) {
				accepted = append(accepted, p.(string))
			}
			if got := slices.Contains(accepted, "acs-crypto"); got != c.crypto {
				t.Fatalf("profiles_accepted %v: acs-crypto %v, want %v", accepted, got, c.crypto)
			}
			if !slices.Equal(accepted[:2], []string{"acs-core", "acs-audit"}) {
				t.Fatalf("profiles_accepted %v", accepted)
			}
		})
	}
}
