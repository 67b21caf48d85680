package opapolicy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"testing"

	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/guardian/opapolicy"
	"github.com/acsledger/acsledger/guardian/policy"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

// recordedSession is one session of ../testdata/provenance_sessions.json
// (made by gen_provenance_sessions.go beside it).
type recordedSession struct {
	Name            string `json:"name"`
	AgentID         string `json:"agent_id"`
	ApproverCapable bool   `json:"approver_capable"`
	Steps           []struct {
		Method  string          `json:"method"`
		Payload json.RawMessage `json:"payload"`
	} `json:"steps"`
}

func loadRecordedSessions(t testing.TB) []recordedSession {
	t.Helper()
	raw, err := os.ReadFile("../testdata/provenance_sessions.json")
	if err != nil {
		t.Fatal(err)
	}
	var sessions []recordedSession
	if err := json.Unmarshal(raw, &sessions); err != nil {
		t.Fatal(err)
	}
	return sessions
}

// engines returns the shipped baseline and baseline 1.0.0 (whose flow
// rules build the provenance graph without the shortcuts of later
// versions), each recorded in a real store.
func engines(t testing.TB) map[string]*policy.Engine {
	t.Helper()
	ctx := context.Background()
	st, err := storeopen.Open(ctx, "sqlite:"+t.TempDir(), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	gs := st
	old, err := policy.BundleFromFS(os.DirFS("../policy/testdata/baseline-1.0.0"), policy.BaselineID, "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*policy.Engine{}
	for _, b := range []*policy.Bundle{policy.Baseline(), old} {
		e, err := policy.New(ctx, b, gs, nil)
		if err != nil {
			t.Fatal(err)
		}
		out[b.ID+"@"+b.Version] = e
	}
	return out
}

// wholeLog is the provenance the Guardian handed its policy before it
// handed a step's lineage: every object under a "provenance" or
// "parser_provenance" member of the session's earlier payloads with a
// string provenance_id, each id once, first seen first (members in sorted
// order), at most 4,096. It is written here apart from guardian's
// ProvenanceLog, so that the differential test compares against the old
// input rather than against the code under test.
type wholeLog struct {
	seen map[string]bool
	objs []json.RawMessage
}

func (w *wholeLog) add(t testing.TB, payload json.RawMessage) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	w.walk(t, v)
}

func (w *wholeLog) walk(t testing.TB, v any) {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if m, ok := v[k].(map[string]any); ok && (k == "provenance" || k == "parser_provenance") {
				if id, ok := m["provenance_id"].(string); ok && !w.seen[id] && len(w.objs) < 4096 {
					b, err := json.Marshal(m)
					if err != nil {
						t.Fatal(err)
					}
					if w.seen == nil {
						w.seen = map[string]bool{}
					}
					w.seen[id] = true
					w.objs = append(w.objs, b)
				}
			}
			w.walk(t, v[k])
		}
	case []any:
		for _, c := range v {
			w.walk(t, c)
		}
	}
}

// stepInput is the Guardian's Input for step i of s, as a live session
// would build it, without provenance.
func stepInput(t testing.TB, s *recordedSession, i int, intent *guardian.Intent) (guardian.Input, any) {
	t.Helper()
	st := s.Steps[i]
	params, err := json.Marshal(map[string]any{
		"acs_version": "0.1.0",
		"request_id":  fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
		"timestamp":   "2026-12-01T12:00:00Z",
		"metadata":    map[string]any{"agent_id": s.AgentID, "session_id": "0b6c3d2e-1f4a-4b5c-8d9e-0f1a2b3c4d5e"},
		"payload":     st.Payload,
	})
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return guardian.Input{
		Method: st.Method, SessionID: "0b6c3d2e-1f4a-4b5c-8d9e-0f1a2b3c4d5e", AgentID: s.AgentID,
		RequestID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), Params: params, Payload: st.Payload,
		Intent:  intent,
		Session: guardian.SessionState{Length: int64(i), ApproverCapable: s.ApproverCapable},
	}, doc
}

// establishedIntent is the Intent an agentTrigger step establishes, or
// the one already in force.
func establishedIntent(t testing.TB, method string, payload json.RawMessage, cur *guardian.Intent) *guardian.Intent {
	if method != "steps/agentTrigger" || cur != nil {
		return cur
	}
	var p struct {
		Intent *guardian.Intent `json:"intent"`
	}
	if err := json.Unmarshal(payload, &p); err != nil {
		t.Fatal(err)
	}
	return p.Intent
}

func decide(t testing.TB, e *policy.Engine, in guardian.Input) []byte {
	t.Helper()
	pin, err := opapolicy.BuildInput(in)
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.Decide(context.Background(), pin)
	if err != nil {
		t.Fatalf("step %s: %v", in.RequestID, err)
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLineageDecidesAsWholeLog is the differential test of the policy
// input's provenance: every step of the recorded sessions
// (../testdata/provenance_sessions.json: thousands of provenance objects,
// flows from untrusted origins, long agent_generated chains, unknown and
// reused ids, a session past the 4,096-object cap) is decided with the
// whole provenance log, as the Guardian used to hand it over, and with the
// step's lineage (guardian.ProvenanceLog.Lineage), under the shipped
// baseline and under 1.0.0; the two decisions must be the same in every
// member (disposition, reasoning, reason codes, rule references, policy
// data, cited provenance, modifications, ask and defer details).
func TestLineageDecidesAsWholeLog(t *testing.T) {
	engs := engines(t)
	names := slices.Sorted(maps.Keys(engs))
	dispositions := map[string]int{}
	var wholeObjects, lineageObjects, maxLog int
	for _, s := range loadRecordedSessions(t) {
		var log guardian.ProvenanceLog
		var whole wholeLog
		var intent *guardian.Intent
		for i, st := range s.Steps {
			intent = establishedIntent(t, st.Method, st.Payload, intent)
			in, doc := stepInput(t, &s, i, intent)
			old, lin := in, in
			old.Provenance = whole.objs
			lin.Provenance = log.Lineage(doc, intent)
			wholeObjects += len(old.Provenance)
			lineageObjects += len(lin.Provenance)
			for _, name := range names {
				want := decide(t, engs[name], old)
				got := decide(t, engs[name], lin)
				if !bytes.Equal(got, want) {
					t.Errorf("%s step %d (%s) under %s:\n lineage (%d objects): %s\n whole log (%d objects): %s",
						s.Name, i, st.Method, name, len(lin.Provenance), got, len(old.Provenance), want)
				}
				var d struct {
					Decision string `json:"decision"`
				}
				if err := json.Unmarshal(want, &d); err != nil {
					t.Fatal(err)
				}
				dispositions[d.Decision]++
			}
			log.Add(st.Payload)
			whole.add(t, st.Payload)
			if log.Len() != len(whole.objs) {
				t.Fatalf("%s step %d: the log keeps %d objects, the whole log %d", s.Name, i, log.Len(), len(whole.objs))
			}
			maxLog = max(maxLog, log.Len())
		}
	}
	t.Logf("decisions %v; provenance objects handed over: %d whole, %d lineage", dispositions, wholeObjects, lineageObjects)
	// The sessions must exercise what the test is for.
	for _, d := range []string{"allow", "ask", "deny"} {
		if dispositions[d] < 10 {
			t.Errorf("only %d %s decisions: the sessions do not exercise the flow rules", dispositions[d], d)
		}
	}
	if maxLog != 4096 {
		t.Errorf("the longest session kept %d objects, want the cap of 4,096", maxLog)
	}
	if lineageObjects == 0 || lineageObjects*10 > wholeObjects {
		t.Errorf("lineage handed %d objects against the whole log's %d: not the small part of the log it should be", lineageObjects, wholeObjects)
	}
}
