package policy

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/acsledger/acsledger/acs"
)

// baselineCase is one entry of testdata/baseline_cases.json: a step in a
// short form the test expands into request params, and what the baseline
// must decide.
type baselineCase struct {
	Name       string          `json:"name"`
	Method     string          `json:"method"`
	Tool       string          `json:"tool"`
	Capability string          `json:"capability"`
	Command    *string         `json:"command"`
	RawCommand string          `json:"raw_command"`
	Arguments  json.RawMessage `json:"arguments"`
	Payload    json.RawMessage `json:"payload"`
	MCP        json.RawMessage `json:"mcp"`
	AgentID    string          `json:"agent_id"`
	// ApproverCapable is the Guardian's knowledge of the client (§9.2).
	ApproverCapable *bool        `json:"approver_capable"`
	Grants          []string     `json:"grants"`
	Provenance      []Provenance `json:"provenance"`
	Intent          *Intent      `json:"intent"`
	Want            struct {
		Decision              Disposition       `json:"decision"`
		ReasonCodes           []string          `json:"reason_codes"`
		RuleIDs               []string          `json:"rule_ids"`
		Redactions            []acs.Redaction   `json:"redactions"`
		Cited                 []string          `json:"cited"`
		Approver              string            `json:"approver"`
		RequestedCapabilities []string          `json:"requested_capabilities"`
		Defer                 *acs.DeferDetails `json:"defer"`
	} `json:"want"`
}

// input expands the case into the Input the Guardian would build.
func (c *baselineCase) input(t *testing.T) *Input {
	t.Helper()
	method := c.Method
	if method == "" {
		method = "steps/toolCallRequest"
	}
	agent := c.AgentID
	if agent == "" {
		agent = "agent-7"
	}
	params := map[string]any{
		"acs_version": "0.1.0",
		"request_id":  "6f1d2c3b-0a4e-4f5a-9b8c-7d6e5f4a3b2c",
		"timestamp":   "2026-11-30T05:00:00Z",
		"metadata":    map[string]any{"agent_id": agent, "session_id": "0b6c3d2e-1f4a-4b5c-8d9e-0f1a2b3c4d5e"},
	}
	switch {
	case c.MCP != nil:
		var mcp map[string]any
		must(t, json.Unmarshal(c.MCP, &mcp))
		for k, v := range mcp {
			params[k] = v
		}
	case c.Payload != nil:
		var p any
		must(t, json.Unmarshal(c.Payload, &p))
		params["payload"] = p
	default:
		args := map[string]any{}
		if c.Arguments != nil {
			must(t, json.Unmarshal(c.Arguments, &args))
		}
		if c.Command != nil {
			args["command"] = map[string]any{
				"value":      *c.Command,
				"provenance": map[string]any{"provenance_id": "p-cmd", "origin": "user_input"},
			}
		}
		payload := map[string]any{"tool": map[string]any{"name": c.Tool}, "arguments": args}
		if c.Capability != "" {
			payload["capability"] = c.Capability
		}
		if c.RawCommand != "" {
			payload["raw_command"] = c.RawCommand
		}
		params["payload"] = payload
	}
	raw, err := json.Marshal(params)
	must(t, err)
	return &Input{
		Method:     method,
		Params:     raw,
		Session:    Session{SessionID: "0b6c3d2e-1f4a-4b5c-8d9e-0f1a2b3c4d5e", AgentID: agent, Position: 3, ApproverCapable: c.ApproverCapable},
		Grants:     c.Grants,
		Intent:     c.Intent,
		Provenance: c.Provenance,
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func loadBaselineCases(t *testing.T) []baselineCase {
	t.Helper()
	raw, err := os.ReadFile("testdata/baseline_cases.json")
	must(t, err)
	var cases []baselineCase
	must(t, json.Unmarshal(raw, &cases))
	if len(cases) < 100 {
		t.Fatalf("only %d baseline cases in testdata/baseline_cases.json", len(cases))
	}
	return cases
}

func TestBaseline(t *testing.T) {
	e, err := New(context.Background(), Baseline(), newMemRecorder(), nil)
	must(t, err)
	for _, c := range loadBaselineCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			d, err := e.Decide(context.Background(), c.input(t))
			if err != nil {
				t.Fatalf("Decide: %v", err)
			}
			w := c.Want
			if d.Disposition != w.Decision {
				t.Fatalf("decision = %s (%s, rules %v), want %s", d.Disposition, d.Reasoning, d.PolicyReferences, w.Decision)
			}
			if !slices.Equal(d.ReasonCodes, w.ReasonCodes) && (len(d.ReasonCodes) > 0 || len(w.ReasonCodes) > 0) {
				t.Errorf("reason_codes = %q, want %q", d.ReasonCodes, w.ReasonCodes)
			}
			var rules []string
			for _, r := range d.PolicyReferences {
				if r.PolicyID != BaselineID || r.PolicyVersion != BaselineVersion {
					t.Errorf("policy reference %+v does not cite %s@%s", r, BaselineID, BaselineVersion)
				}
				rules = append(rules, r.RuleID)
			}
			if !slices.Equal(rules, w.RuleIDs) {
				t.Errorf("rule ids = %q, want %q", rules, w.RuleIDs)
			}
			if d.Disposition != acs.Allow && d.Reasoning == "" {
				t.Errorf("%s without reasoning", d.Disposition)
			}
			if !slices.Equal(d.CitedProvenanceIDs, w.Cited) && (len(d.CitedProvenanceIDs) > 0 || len(w.Cited) > 0) {
				t.Errorf("cited_provenance_ids = %q, want %q", d.CitedProvenanceIDs, w.Cited)
			}
			switch d.Disposition {
			case acs.Modify:
				if w.Redactions != nil {
					got, _ := json.Marshal(d.Modifications.Redactions)
					want, _ := json.Marshal(w.Redactions)
					if string(got) != string(want) {
						t.Errorf("redactions = %s\nwant %s", got, want)
					}
				}
			case acs.Ask:
				if d.AskDetails.Approver.ID != w.Approver {
					t.Errorf("approver = %+v, want id %q", d.AskDetails.Approver, w.Approver)
				}
				if !slices.Equal(d.AskDetails.RequestedCapabilities, w.RequestedCapabilities) && len(w.RequestedCapabilities) > 0 {
					t.Errorf("requested_capabilities = %q, want %q", d.AskDetails.RequestedCapabilities, w.RequestedCapabilities)
				}
			case acs.Defer:
				if w.Defer != nil && *d.DeferDetails != *w.Defer {
					t.Errorf("defer_details = %+v, want %+v", *d.DeferDetails, *w.Defer)
				}
				if d.DeferDetails.TimeoutDecision != acs.Deny {
					t.Errorf("timeout_decision = %q, want deny", d.DeferDetails.TimeoutDecision)
				}
			}
		})
	}
}
