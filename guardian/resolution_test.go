package guardian_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/schemas"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/verify"
)

// TestResolutionRequestHash: the entry an approver's resolution writes
// carries request_hash like every other entry (ACS §8.1, ACS-Audit): the
// SHA-256 of the RFC 8785 form of the approval as received, which the
// entry holds as approval, for a grant (intent_extension) and a denial
// (ask_resolution) alike.
func TestResolutionRequestHash(t *testing.T) {
	pol := askPolicy()
	alice, edit := approverSetup(t, pol)
	e := newResumeEnv(t, "sqlite", edit)
	e.send(t, "steps/sessionStart", intentPayload("invoice.read"))
	for _, c := range []struct {
		decision guardian.Disposition
		scope    string
		stepType string
	}{
		{guardian.Allow, "session", "intent_extension"},
		{guardian.Deny, "", "ask_resolution"},
	} {
		ask := e.send(t, "steps/toolCallRequest", toolCall("pay"))
		signed := signedApproval(t, alice, e.a.sessionID, ask.str("request_id"), c.decision, c.scope)
		// The approver sends it indented, not in canonical form: the hash
		// is over the canonical form.
		var sent bytes.Buffer
		if err := json.Indent(&sent, signed, "", "  "); err != nil {
			t.Fatal(err)
		}
		res, err := e.g.ResolveAsk(t.Context(), sent.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		entries := verifyStoredChain(t, e.s.store, e.a.sessionID, res.ChainHash)
		last := entries[len(entries)-1]
		var got struct {
			StepType    string          `json:"step_type"`
			RequestHash string          `json:"request_hash"`
			AskStepID   string          `json:"ask_step_id"`
			Approval    json.RawMessage `json:"approval"`
		}
		if err := json.Unmarshal(last.Content, &got); err != nil {
			t.Fatal(err)
		}
		canon, err := acs.Canonicalize(sent.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(canon)
		if got.StepType != c.stepType || got.AskStepID != ask.str("request_id") || got.RequestHash != hex.EncodeToString(sum[:]) {
			t.Fatalf("resolution entry %s: want step_type %s and request_hash %x", last.Content, c.stepType, sum)
		}
		held, err := acs.Canonicalize(got.Approval)
		if err != nil || !bytes.Equal(held, canon) {
			t.Fatalf("the entry's approval is not the approval received:\n%s\n%s", held, canon)
		}
	}
	// Every entry of the chain carries a request_hash, and is a
	// context-entry.json ContextEntry.
	r := e.send(t, "steps/toolCallRequest", toolCall("read_file"))
	_, jsonl := chainJSONL(t, e.s.store, e.a.sessionID)
	for i, line := range bytes.Split(bytes.TrimSpace(jsonl), []byte("\n")) {
		if err := schemas.Validate(schemas.ContextEntry, line); err != nil {
			t.Errorf("entry %d does not match context-entry.json: %v\n%s", i, err, line)
		}
	}
	for _, en := range verifyStoredChain(t, e.s.store, e.a.sessionID, r.str("chain_hash")) {
		var h struct {
			RequestHash string `json:"request_hash"`
		}
		_ = json.Unmarshal(en.Content, &h)
		if !hexHash.MatchString(h.RequestHash) {
			t.Errorf("entry %d (%s) has no request_hash", en.Position, en.StepType)
		}
	}
}

// TestAgentHeadThroughGrant: an agent that sends the last chain_hash it
// was given on every step (ACS §8.6 cross-check) is not denied after an
// approver's grant moved the head; the signed response to its next step
// carries previous_chain_hash, the head after the grant, and chain_hash,
// the head to send next. A head the agent was never given is still a
// mismatch.
func TestAgentHeadThroughGrant(t *testing.T) {
	t.Run("live", func(t *testing.T) { testAgentHeadThroughGrant(t, nil) })
	// The head last published to the agent is rebuilt on resume.
	t.Run("restart after the grant", func(t *testing.T) { testAgentHeadThroughGrant(t, losses[0].lose) })
}

func testAgentHeadThroughGrant(t *testing.T, lose func(*testing.T, *resumeEnv)) {
	pol := askPolicy()
	alice, edit := approverSetup(t, pol)
	e := newResumeEnv(t, "sqlite", edit)
	var head string
	var sent bytes.Buffer // every signed answer, one a line, for the auditor
	step := func(tool string) reply {
		t.Helper()
		r := decode(t, e.tp.send(t, e.a.envelope(t, "steps/toolCallRequest", toolCall(tool), func(p map[string]any) {
			if head != "" {
				p["metadata"].(map[string]any)["session_state"] = map[string]any{"chain_hash": head}
			}
		})))
		mustResult(t, r)
		hmacChecker(t, e.a.sessionID, r.raw)
		sent.Write(r.raw)
		sent.WriteByte('\n')
		return r
	}
	first := step("read_file")
	head = first.str("chain_hash")
	ask := step("pay")
	if ask.decision() != "ask" {
		t.Fatalf("want ASK: %s", ask.raw)
	}
	beforeGrant := head
	head = ask.str("chain_hash")

	approvals := httptest.NewServer(e.g.ApprovalHandler())
	defer approvals.Close()
	resp, err := http.Post(approvals.URL, "application/json", bytes.NewReader(signedApproval(t, alice, e.a.sessionID, ask.str("request_id"), guardian.Allow, "session")))
	if err != nil {
		t.Fatal(err)
	}
	var granted map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&granted)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || granted["chain_hash"] == head {
		t.Fatalf("grant: %d %v", resp.StatusCode, granted)
	}

	if lose != nil {
		lose(t, e)
	}
	after := step("read_file")
	if after.decision() != "allow" {
		t.Fatalf("the step after the grant, sent with the agent's last head: %s", after.raw)
	}
	if after.str("previous_chain_hash") != granted["chain_hash"] || after.str("chain_hash") == granted["chain_hash"] {
		t.Fatalf("the step after the grant: previous_chain_hash %q, chain_hash %q; the grant's head is %s", after.str("previous_chain_hash"), after.str("chain_hash"), granted["chain_hash"])
	}
	head = after.str("chain_hash")
	next := step("read_file")
	if next.decision() != "allow" || next.str("previous_chain_hash") != "" {
		t.Fatalf("with nothing written in between: %s", next.raw)
	}
	entries := verifyStoredChain(t, e.s.store, e.a.sessionID, next.str("chain_hash"))
	if entries[3].PreviousHash == nil || entries[3].PreviousHash.String() != granted["chain_hash"] {
		t.Fatalf("the step after the grant is not chained onto the grant")
	}

	head = beforeGrant
	r := step("read_file")
	if r.decision() != "deny" || r.reasonCodes()[0] != "chain_mismatch" {
		t.Fatalf("an old head: %s", r.raw)
	}

	// The auditor checks every published head, previous_chain_hash
	// included, against the chain with the grant in it.
	_, jsonl := chainJSONL(t, e.s.store, e.a.sessionID)
	ks, err := sig.NewKeySet(mustKeys(t).hmac.Public())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := verify.VerifyChainHeads(bytes.NewReader(jsonl), &sent, ks, e.a.sessionID)
	if err != nil || !rep.Verified() {
		t.Fatalf("the published heads do not verify: %v %+v", err, rep)
	}
}
