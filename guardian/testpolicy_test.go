package guardian

import (
	"context"
	"encoding/json"

	"github.com/acsledger/acsledger/acs"
)

// TestPolicy is a tiny deterministic Policy for this package's tests,
// not for production: the first rule whose Method and Tool match decides,
// and a step no rule matches is allowed. Real deployments use the OPA/Rego
// evaluator of guardian/policy.
type TestPolicy struct {
	PolicyID      string
	PolicyVersion string
	Rules         []TestRule
	// Err, when set, makes every decision fail (decision-failure tests).
	Err error
}

// TestRule is one rule of a TestPolicy.
type TestRule struct {
	ID string
	// Method matches the request method exactly; "" matches any.
	Method string
	// Tool matches payload.tool.name (steps/toolCallRequest) or
	// payload.name (MCP tools/call); "" matches any.
	Tool string
	// Decision is returned as is, with a policy reference to this rule.
	Decision Decision
}

// Decide implements Policy.
func (p *TestPolicy) Decide(ctx context.Context, in Input) (Decision, error) {
	if p.Err != nil {
		return Decision{}, p.Err
	}
	tool := toolName(in.Payload)
	for _, r := range p.Rules {
		if (r.Method == "" || r.Method == in.Method) && (r.Tool == "" || r.Tool == tool) {
			d := r.Decision
			d.PolicyReferences = append([]acs.PolicyReference{{PolicyID: p.PolicyID, PolicyVersion: p.PolicyVersion, RuleID: r.ID}}, d.PolicyReferences...)
			if d.Cache == nil {
				d.Cache = json.RawMessage(`{"test_policy_rule":` + quote(r.ID) + `}`)
			}
			return d, nil
		}
	}
	return Decision{
		Disposition:      Allow,
		Reasoning:        "no rule matched",
		PolicyReferences: []acs.PolicyReference{{PolicyID: p.PolicyID, PolicyVersion: p.PolicyVersion, RuleID: "default_allow"}},
	}, nil
}

func toolName(payload json.RawMessage) string {
	var p struct {
		Tool struct {
			Name string `json:"name"`
		} `json:"tool"`
		Name string `json:"name"`
	}
	_ = json.Unmarshal(payload, &p)
	if p.Tool.Name != "" {
		return p.Tool.Name
	}
	return p.Name
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
