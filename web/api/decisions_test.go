package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/guardian/policy"
	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/web/api"
	"github.com/acsledger/acsledger/web/internal/webtest"
)

func TestPoliciesRoute(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	webtest.RecordPermissive(t, f.Store)
	base := evidenceServer(t, f, nil)

	type listJSON struct {
		Policies []api.PolicyJSON `json:"policies"`
	}
	list := func(query string) (int, listJSON, []byte) {
		t.Helper()
		return getStrict[listJSON](t, base+"/policies"+query)
	}

	code, l, b := list("")
	if code != 200 || len(l.Policies) != 2 {
		t.Fatalf("GET /policies: %d %s", code, b)
	}
	// Oldest first: the Guardian recorded the baseline before the test
	// recorded the permissive version.
	for i, want := range [][2]string{{policy.BaselineID, policy.BaselineVersion}, {policy.BaselineID, webtest.PermissiveVersion}} {
		p := l.Policies[i]
		if p.PolicyID != want[0] || p.PolicyVersion != want[1] || len(p.Digest) != 64 || p.RecordedAt.IsZero() || p.Content != nil {
			t.Errorf("policies[%d] = %+v, want %s %s with a digest and no content", i, p, want[0], want[1])
		}
	}
	if bytes.Contains(b, []byte(`"content"`)) {
		t.Errorf("content without include_content: %s", b)
	}

	code, l, b = list("?include_content=true")
	if code != 200 || len(l.Policies) != 2 {
		t.Fatalf("include_content=true: %d %s", code, b)
	}
	for _, p := range l.Policies {
		sum := sha256.Sum256(p.Content)
		if len(p.Content) == 0 || hex.EncodeToString(sum[:]) != p.Digest {
			t.Errorf("%s %s: %d content bytes whose SHA-256 is not the digest %s", p.PolicyID, p.PolicyVersion, len(p.Content), p.Digest)
		}
	}

	if code, l, b = list("?policy_id=" + policy.BaselineID); code != 200 || len(l.Policies) != 2 {
		t.Errorf("policy_id=%s: %d %s", policy.BaselineID, code, b)
	}
	if code, _, b = list("?policy_id=nope"); code != 200 || string(bytes.TrimSpace(b)) != `{"policies":[]}` {
		t.Errorf("policy_id=nope: %d %s", code, b)
	}
	if code, _, b = list("?include_content=maybe"); code != 400 || !strings.Contains(webtest.ErrorText(t, b), "include_content") {
		t.Errorf("include_content=maybe: %d %s", code, b)
	}

}

// decisionBody is GET /decisions/{request_id} decoded strictly.
type decisionBody struct {
	SessionID    string          `json:"session_id"`
	Position     int64           `json:"position"`
	EntryID      string          `json:"entry_id"`
	StepID       string          `json:"step_id"`
	StepType     string          `json:"step_type"`
	Timestamp    string          `json:"timestamp"`
	RecordedAt   string          `json:"recorded_at"`
	EntryHash    string          `json:"entry_hash"`
	PreviousHash *string         `json:"previous_hash"`
	Entry        json.RawMessage `json:"entry"`
	RequestID    string          `json:"request_id"`
	Response     json.RawMessage `json:"response"`
	Decision     json.RawMessage `json:"decision"`
	DecisionFrom string          `json:"decision_from"`
}

func getDecisionBody(t *testing.T, u string) (int, decisionBody, []byte) {
	t.Helper()
	return getStrict[decisionBody](t, u)
}

// getStrict gets u and decodes a 200's body into a T, refusing members T
// does not know.
func getStrict[T any](t *testing.T, u string) (int, T, []byte) {
	t.Helper()
	code, _, b := webtest.Do(t, "GET", u, nil)
	var v T
	if code == 200 {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("GET %s: %v\n%s", u, err, b)
		}
	}
	return code, v, b
}

func TestDecisionRoute(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	ctx := context.Background()
	base := evidenceServer(t, f, nil)
	deny := f.Step(t, "steps/toolCallRequest", "deny")
	e, err := func() (ledger.Entry, error) {
		for e, err := range ledger.AllEntries(ctx, f.Store, deny.SessionID) {
			if err != nil || e.StepID == deny.RequestID {
				return e, err
			}
		}
		t.Fatalf("session %s has no step %s", deny.SessionID, deny.RequestID)
		return ledger.Entry{}, nil
	}()
	if err != nil {
		t.Fatal(err)
	}

	// Found with and without the session hint, the same answer.
	for _, q := range []string{"", "?session_id=" + deny.SessionID} {
		code, d, b := getDecisionBody(t, base+"/decisions/"+deny.RequestID+q)
		if code != 200 {
			t.Fatalf("GET decision%s: %d %s", q, code, b)
		}
		if d.RequestID != deny.RequestID || d.StepID != deny.RequestID || d.SessionID != deny.SessionID ||
			d.Position != e.Position || d.StepType != "steps/toolCallRequest" || d.EntryHash != e.EntryHash.String() ||
			d.Timestamp != e.Timestamp || d.EntryID != e.EntryID || !bytes.Equal(d.Entry, e.Content) {
			t.Errorf("GET decision%s: the step is not the stored entry at %d\n%s", q, e.Position, b)
		}
		if d.PreviousHash == nil || *d.PreviousHash != e.PreviousHash.String() {
			t.Errorf("previous_hash %v, want %s", d.PreviousHash, e.PreviousHash)
		}
		// The decision is the signed response's result: the verdict with
		// the policy reference of the baseline and the chain_hash the
		// response published, which is this entry's hash (ACS §8.6).
		var dec struct {
			Decision         string                `json:"decision"`
			ReasonCodes      []string              `json:"reason_codes"`
			PolicyReferences []acs.PolicyReference `json:"policy_references"`
			ChainHash        string                `json:"chain_hash"`
		}
		if err := json.Unmarshal(d.Decision, &dec); err != nil {
			t.Fatalf("decision: %v\n%s", err, b)
		}
		if d.DecisionFrom != "response" || dec.Decision != "deny" || len(dec.ReasonCodes) == 0 || dec.ChainHash != e.EntryHash.String() ||
			len(dec.PolicyReferences) == 0 || dec.PolicyReferences[0].PolicyID != policy.BaselineID ||
			dec.PolicyReferences[0].PolicyVersion != policy.BaselineVersion || dec.PolicyReferences[0].RuleID == "" {
			t.Errorf("decision from %q: %s", d.DecisionFrom, d.Decision)
		}
		stored, err := f.Store.Response(ctx, e.SessionID, e.Position)
		if err != nil || !bytes.Equal(d.Response, stored) {
			t.Errorf("response is not the stored one (%v)\n got %s\nwant %s", err, d.Response, stored)
		}
	}

	// An entry appended without the Guardian has no response; its
	// decision is read from the entry. Its step id carries markup and a
	// '/', escaped into one path segment.
	hostile := `req/<img src=x onerror=alert(1)>`
	plain := []byte(`{"entry_id":"9e1f0001-5c1d-4e2a-8b6f-00003a7c00d0","step_id":` + strconvQuote(hostile) +
		`,"step_type":"steps/toolCallRequest","timestamp":"2026-03-14T14:02:01.000Z",` +
		`"request_hash":"5b8b6336ec4634d5d69f3a2007aa6f483d1e23f1d68b2b29acad7ad024448b7e",` +
		`"decision":{"disposition":"deny","reason_codes":["<b>bold</b>"],"policy_references":[]},` +
		`"provenance_summary":{"entry_count":0,"origins_seen":[]}}`)
	if _, err := f.Store.Append(ctx, ledger.Record{SessionID: "plain", AgentID: "agent-1", Entry: plain}); err != nil {
		t.Fatal(err)
	}
	code, d, b := getDecisionBody(t, base+"/decisions/"+url.PathEscape(hostile)+"?session_id=plain")
	if code != 200 || d.StepID != hostile || d.RequestID != hostile || d.SessionID != "plain" || d.Position != 0 || d.PreviousHash != nil ||
		string(d.Response) != "null" || d.DecisionFrom != "entry" ||
		string(d.Decision) != `{"disposition":"deny","policy_references":[],"reason_codes":["<b>bold</b>"]}` {
		t.Errorf("entry without a response: %d %s", code, b)
	}

	for _, c := range []struct {
		name, path string
		code       int
		msg        string
	}{
		{"unknown request", "/decisions/no-such-request", 404, "no-such-request"},
		{"wrong session", "/decisions/" + deny.RequestID + "?session_id=" + f.ECDSASession, 404, f.ECDSASession},
		{"unknown session", "/decisions/" + deny.RequestID + "?session_id=nope", 404, "nope"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, b := webtest.Do(t, "GET", base+c.path, nil)
			if code != c.code || !strings.Contains(webtest.ErrorText(t, b), c.msg) {
				t.Errorf("%d %s, want %d naming %q", code, b, c.code, c.msg)
			}
		})
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
