package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/guardian/policy"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

// TestBaselineCasesOnLineage decides every baseline case in a long
// session: the case's own session provenance among 1,000 objects of
// unrelated earlier steps (a trusted/untrusted mix, with agent_generated
// chains among them). What the Guardian hands the policy for the step, the
// step's lineage (guardian.ProvenanceLog.Lineage), must be decided as the
// whole log is and as the case alone is (TestBaseline holds those to the
// cases' expectations).
func TestBaselineCasesOnLineage(t *testing.T) {
	ctx := context.Background()
	st, err := storeopen.Open(ctx, "sqlite:"+t.TempDir(), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := policy.New(ctx, policy.Baseline(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	decide := func(in *policy.Input) []byte {
		t.Helper()
		d, err := e.Decide(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	origins := []string{"tool_output", "retrieved", "user_input", "external"}
	names, ins := policy.BaselineCaseInputs(t)
	reached := 0
	for i, in := range ins {
		t.Run(names[i], func(t *testing.T) {
			// The earlier steps: noise, with the case's own objects in
			// the middle, each carried by a step payload.
			var log guardian.ProvenanceLog
			var whole []policy.Provenance
			add := func(p policy.Provenance) {
				payload, err := json.Marshal(map[string]any{"result": map[string]any{"value": "x", "provenance": p}})
				if err != nil {
					t.Fatal(err)
				}
				log.Add(payload)
				whole = append(whole, p)
			}
			for n := range 1000 {
				p := policy.Provenance{ProvenanceID: fmt.Sprintf("noise-%d", n), Origin: origins[n%len(origins)]}
				if n%7 == 6 {
					p.Origin, p.DerivedFrom = "agent_generated", []string{fmt.Sprintf("noise-%d", n-1), fmt.Sprintf("noise-%d", n-5)}
				}
				add(p)
				if n == 500 {
					for _, p := range in.Provenance {
						add(p)
					}
				}
			}
			var params any
			if err := json.Unmarshal(in.Params, &params); err != nil {
				t.Fatal(err)
			}
			var intent *guardian.Intent
			if in.Intent != nil && in.Intent.ParserProvenance != nil {
				pp, err := json.Marshal(in.Intent.ParserProvenance)
				if err != nil {
					t.Fatal(err)
				}
				intent = &guardian.Intent{ParserProvenance: pp}
			}
			var lineage []policy.Provenance
			for _, raw := range log.Lineage(params, intent) {
				var p policy.Provenance
				if err := json.Unmarshal(raw, &p); err != nil {
					t.Fatal(err)
				}
				lineage = append(lineage, p)
			}
			reached += len(lineage)
			if len(lineage) > len(in.Provenance) {
				t.Errorf("the lineage holds %d objects, the case has %d: it reached the unrelated steps", len(lineage), len(in.Provenance))
			}
			alone := decide(in)
			padded, onLineage := *in, *in
			padded.Provenance, onLineage.Provenance = whole, lineage
			if got, want := decide(&onLineage), decide(&padded); !bytes.Equal(got, want) || !bytes.Equal(got, alone) {
				t.Errorf("on the lineage (%d objects):\n %s\nwith the whole log (%d objects):\n %s\nalone:\n %s", len(lineage), got, len(whole), want, alone)
			}
		})
	}
	if reached == 0 {
		t.Error("no case reached any earlier provenance: the test does not exercise the lineage")
	}
}
