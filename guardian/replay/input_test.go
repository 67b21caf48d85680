package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/guardian/opapolicy"
	"github.com/acsledger/acsledger/guardian/replay"
	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/ledger"
)

// untrustedEmail is a consequential call whose recipient came from a
// retrieved document: the baseline's flow rules ASK an approver, or deny
// when input.session.approver_capable is false.
func untrustedEmail(id string) map[string]any {
	return map[string]any{
		"tool": map[string]any{"name": "send_email"},
		"arguments": map[string]any{
			"to":   map[string]any{"value": "ops@example.com", "provenance": map[string]any{"provenance_id": id, "origin": "retrieved", "source_id": "wiki"}},
			"body": map[string]any{"value": "status", "provenance": map[string]any{"provenance_id": id + "-body", "origin": "agent_generated", "derived_from": []string{id}}},
		},
	}
}

// TestReplayApproverCapability decides a step as an approver-incapable
// client (DENY, approver_unavailable) and as a capable one (ASK), and
// replays each from the ledger to the recorded decision: the entry's
// metadata.approver_capable reaches the replayed input.session.
// An entry written without metadata replays with not_reconstructed naming
// both session members.
func TestReplayApproverCapability(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		for _, capable := range []bool{false, true} {
			name := kind + "/incapable"
			want := "deny"
			if capable {
				name, want = kind+"/capable", "ask"
			}
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				f := evidencetest.NewSetup(t, kind, evidencetest.Setup{ApproverCapable: func(string) bool { return capable }})
				step := f.Call(t, f.HMACSession, "steps/toolCallRequest", untrustedEmail("p-wiki"))
				if step.Decision != want {
					t.Fatalf("the Guardian answered %s, want %s", step.Decision, want)
				}
				e, err := replay.FindEntry(ctx, f.Store, step.RequestID, step.SessionID)
				if err != nil {
					t.Fatal(err)
				}
				var entry struct {
					Metadata map[string]any `json:"metadata"`
				}
				if err := json.Unmarshal(e.Content, &entry); err != nil {
					t.Fatal(err)
				}
				deferrals := 0
				for _, s := range f.Steps {
					if s.SessionID == step.SessionID && s.Decision == "defer" {
						deferrals++
					}
				}
				if entry.Metadata["approver_capable"] != capable || entry.Metadata["deferrals"] != float64(deferrals) {
					t.Fatalf("entry metadata %v, want approver_capable %v and deferrals %d", entry.Metadata, capable, deferrals)
				}
				res, err := replay.Replay(ctx, f.Store, replay.Request{RequestID: step.RequestID})
				if err != nil {
					t.Fatal(err)
				}
				if !res.Same || string(res.Replayed.Disposition) != want || len(res.NotReconstructed) != 0 {
					t.Fatalf("replay: same=%v diff=%q replayed %s, not reconstructed %q", res.Same, res.Diff, res.Replayed.Disposition, res.NotReconstructed)
				}
				if !capable && !slices.Contains(res.Replayed.ReasonCodes, guardian.ReasonApproverUnavailable) {
					t.Errorf("replayed reason codes %v lack %s", res.Replayed.ReasonCodes, guardian.ReasonApproverUnavailable)
				}
				if capable {
					return
				}

				// The same entry without its metadata, as a Guardian wrote
				// it before recording metadata, in a session of its own.
				var content map[string]json.RawMessage
				if err := json.Unmarshal(e.Content, &content); err != nil {
					t.Fatal(err)
				}
				delete(content, "metadata")
				old, _ := json.Marshal(content)
				resp, err := f.Store.Response(ctx, e.SessionID, e.Position)
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := f.Store.AppendRequest(ctx, ledger.Record{SessionID: "legacy", AgentID: "agent-7", Entry: old}, step.Params,
					ledger.Seen{RequestID: step.RequestID, Nonce: "legacy"}, func(ledger.Appended) ([]byte, error) { return resp, nil }); err != nil {
					t.Fatal(err)
				}
				res, err = replay.Replay(ctx, f.Store, replay.Request{RequestID: step.RequestID, SessionID: "legacy"})
				if err != nil {
					t.Fatal(err)
				}
				got := strings.Join(res.NotReconstructed, "\n")
				for _, member := range []string{"session.approver_capable (", "session.deferrals ("} {
					if !strings.Contains(got, member) {
						t.Errorf("not reconstructed %q does not name %s", res.NotReconstructed, member)
					}
				}
			})
		}
	}
}

// inputRecorder is a guardian.Policy that keeps, for each request, the
// policy input document the live decision evaluated, built by the same
// function Decide builds it with.
type inputRecorder struct {
	next guardian.Policy
	mu   sync.Mutex
	docs map[string][]byte
	t    testing.TB
}

func (r *inputRecorder) Decide(ctx context.Context, in guardian.Input) (guardian.Decision, error) {
	pin, err := opapolicy.BuildInput(in)
	if err != nil {
		r.t.Errorf("live input of %s: %v", in.RequestID, err)
	} else if doc, err := pin.Document(); err != nil {
		r.t.Errorf("live input document of %s: %v", in.RequestID, err)
	} else {
		r.mu.Lock()
		r.docs[in.RequestID] = doc
		r.mu.Unlock()
	}
	return r.next.Decide(ctx, in)
}

// TestReplayInputIsLiveInput fails if the input a replay evaluates ever
// differs from the one the Guardian's policy evaluated: for every step of
// four sessions (provenance lineage across steps, an Intent established
// by the first agentTrigger of a session, ASK and DENY on untrusted flows,
// the fixture's allow, deny and modify), the live input document captured at decision time and the
// one replay rebuilds from the ledger are the same bytes in RFC 8785 form.
func TestReplayInputIsLiveInput(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			rec := &inputRecorder{docs: map[string][]byte{}, t: t}
			oncall, err := sig.GenerateKey(sig.ECDSAP256, "security-oncall")
			if err != nil {
				t.Fatal(err)
			}
			approvers, err := sig.NewKeySet(oncall.Public())
			if err != nil {
				t.Fatal(err)
			}
			f := evidencetest.NewSetup(t, kind, evidencetest.Setup{
				ApproverCapable: func(string) bool { return true },
				WrapPolicy:      func(p guardian.Policy) guardian.Policy { rec.next = p; return rec },
				ApproverKeys:    approvers,
			})
			// An approver's grant of scope session in a session with no
			// Intent: the steps after it see the Intent the grant made.
			ask := f.Call(t, f.HMACSession, "steps/toolCallRequest", untrustedEmail("p-grant"))
			if ask.Decision != "ask" {
				t.Fatalf("want ASK, got %s", ask.Decision)
			}
			signer, _ := oncall.Signer("")
			approval, err := guardian.SignApproval(guardian.Approval{
				SessionID: f.HMACSession, AskStepID: ask.RequestID, Approver: acs.Approver{Type: "human", ID: "security-oncall"},
				Decision: guardian.Allow, Timestamp: "2026-03-14T15:09:26Z",
				IntentExtension: &guardian.ApprovalExtension{Capabilities: []string{"email.send"}, Scope: "session"},
			}, signer)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Guardian.ResolveAsk(ctx, approval); err != nil {
				t.Fatalf("grant: %v", err)
			}
			f.Call(t, f.HMACSession, "steps/toolCallRequest", map[string]any{"tool": map[string]any{"name": "list_dir"}, "arguments": map[string]any{}})
			// The Intent is established only by sessionStart or the first
			// agentTrigger (ACS §8.4): new sessions, beside the fixture's.
			for _, sid := range []string{f.HMACSession, f.ECDSASession, f.NewSession(t, f.HMACSession), f.NewSession(t, f.ECDSASession)} {
				f.Call(t, sid, "steps/agentTrigger", map[string]any{"intent": map[string]any{
					"raw": "report the status", "parsed": []string{"message.send"}, "scope_mode": "strict",
					"parser_provenance": map[string]any{"provenance_id": "p-intent-" + sid[:4], "origin": "user_input"},
				}})
				f.Call(t, sid, "steps/toolCallRequest", untrustedEmail("p-doc-"+sid[:4]))
				f.Call(t, sid, "steps/toolCallRequest", map[string]any{
					"tool": map[string]any{"name": "write_file"},
					"arguments": map[string]any{"path": map[string]any{"value": "out.txt", "provenance": map[string]any{
						"provenance_id": "p-derived-" + sid[:4], "origin": "agent_generated", "derived_from": []string{"p-doc-" + sid[:4], "p-doc-" + sid[:4] + "-body"},
					}}},
				})
			}
			if len(rec.docs) != len(f.Steps) {
				t.Fatalf("the policy was asked about %d steps, the fixture made %d", len(rec.docs), len(f.Steps))
			}
			var sawIntent, sawProvenance bool
			for _, step := range f.Steps {
				live, err := acs.Canonicalize(rec.docs[step.RequestID])
				if err != nil {
					t.Fatal(err)
				}
				in, notRebuilt, err := replay.PolicyInput(ctx, f.Store, replay.Request{RequestID: step.RequestID})
				if err != nil {
					t.Fatalf("replay input of %s: %v", step.RequestID, err)
				}
				doc, err := in.Document()
				if err != nil {
					t.Fatal(err)
				}
				replayed, err := acs.Canonicalize(doc)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(live, replayed) || len(notRebuilt) != 0 {
					t.Errorf("%s (%s): not reconstructed %q\n live:   %s\n replay: %s", step.Method, step.RequestID, notRebuilt, live, replayed)
				}
				sawIntent = sawIntent || in.Intent != nil
				sawProvenance = sawProvenance || len(in.Provenance) > 1
			}
			if !sawIntent || !sawProvenance {
				t.Errorf("the steps did not exercise the Intent (%v) or earlier provenance (%v)", sawIntent, sawProvenance)
			}
		})
	}
}
