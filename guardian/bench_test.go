package guardian_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/ledger"
)

// BenchmarkStep measures one signed toolCallRequest answered in process
// (parse, schemas, signature, replay record, policy, chained append,
// signed answer) against the same-run baseline of the store's bare
// AppendRequest of an entry of similar size with an HMAC-signed response:
// the Guardian's overhead is the ratio of the two. Durable SQLite store.
//
//	go test ./guardian -run XXX -bench BenchmarkStep -benchtime 2000x
func BenchmarkStep(b *testing.B) {
	t := &testing.T{}
	k := mustKeys(t)
	b.Run("baseline-appendrequest", func(b *testing.B) {
		st := openStoreB(b)
		signer, _ := k.hmac.Signer("bench")
		entry := func(i int, stepID string) []byte {
			e, _ := json.Marshal(map[string]any{
				"entry_id": uuid(), "step_id": stepID, "step_type": "steps/toolCallRequest",
				"timestamp": "2026-11-30T05:00:00.000000000Z", "request_hash": fmt.Sprintf("%064x", i), "agent_id": "agent-7",
				"decision": map[string]any{"disposition": "allow", "reasoning": "no rule matched", "reason_codes": []string{},
					"policy_references": []any{map[string]any{"policy_id": "p", "policy_version": "1", "rule_id": "default_allow"}}},
			})
			return e
		}
		entries, stepIDs := make([][]byte, b.N), make([]string, b.N)
		for i := range entries {
			stepIDs[i] = uuid()
			entries[i] = entry(i, stepIDs[i])
		}
		ctx := context.Background()
		b.ResetTimer()
		for i := range b.N {
			seen := ledger.Seen{RequestID: stepIDs[i], At: time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)}
			_, _, err := st.AppendRequest(ctx, ledger.Record{SessionID: "bench", AgentID: "agent-7", Entry: entries[i]}, benchParams, seen, func(a ledger.Appended) ([]byte, error) {
				resp, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": i, "result": map[string]any{
					"type": "final", "acs_version": "0.1.0", "request_id": "6f1d2c3b-0a4e-4f5a-9b8c-7d6e5f4a3b2c", "decision": "allow", "chain_hash": a.EntryHash.String()}})
				return sig.SignEnvelope(resp, sig.Result, signer)
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, c := range []struct {
		name     string
		agentKey *sig.PrivateKey
		respKey  *sig.PrivateKey
	}{
		{"guardian-hmac", k.hmac, k.ecdsa},
		{"guardian-ecdsa", k.agent, k.ecdsa},
		{"guardian-mldsa65", k.agent, k.mldsa},
	} {
		b.Run(c.name, func(b *testing.B) {
			st := openStoreB(b)
			g, err := guardian.New(guardian.Config{
				Store: st, Policy: &guardian.TestPolicy{PolicyID: "p", PolicyVersion: "1"},
				Keys: mustKeySet(b, k), HMACKeys: []*sig.PrivateKey{k.hmac}, ResponseKey: c.respKey,
				Clock: (&clock{now: t0}).Now, Logger: discard,
			})
			if err != nil {
				b.Fatal(err)
			}
			a := newAgent(t, c.agentKey, (&clock{now: t0}).Now)
			if r := guardian.ServeForTest(g, a.envelope(t, guardian.MethodHello, a.hello(t, nil), nil)); !json.Valid(r) {
				b.Fatal("hello")
			}
			bodies := make([][]byte, b.N)
			for i := range bodies {
				bodies[i] = a.envelope(t, "steps/toolCallRequest", toolCall("read_file"), nil)
			}
			b.ResetTimer()
			for i := range b.N {
				out := guardian.ServeForTest(g, bodies[i])
				if !bytes.Contains(out, []byte(`"decision":"allow"`)) {
					b.Fatalf("answer %s", out)
				}
			}
		})
	}
}

// benchParams stands in for a step's params, stored beside each entry.
var benchParams = []byte(`{"acs_version":"0.1.0","request_id":"6f1d2c3b-0a4e-4f5a-9b8c-7d6e5f4a3b2c","payload":{"tool":{"name":"read_file"},"arguments":{"path":{"value":"README.md"}}}}`)
