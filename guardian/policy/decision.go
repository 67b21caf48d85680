package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/acsledger/acsledger/acs"
)

// Disposition is an ACS verdict (ACS §6); the type is acs's.
type Disposition = acs.Disposition

// Decision is the policy layer's verdict on one step: the decision fields
// of an ACS result (ACS §6.1) plus the evidence needed to replay it.
type Decision struct {
	Disposition Disposition `json:"decision"`
	Reasoning   string      `json:"reasoning,omitempty"`
	ReasonCodes []string    `json:"reason_codes,omitempty"`
	// PolicyReferences names the bundle version and the rules that fired.
	// Every decision has at least one.
	PolicyReferences   []acs.PolicyReference `json:"policy_references"`
	PolicyData         json.RawMessage       `json:"policy_data,omitempty"`
	CitedProvenanceIDs []string              `json:"cited_provenance_ids,omitempty"`
	Modifications      *acs.Modifications    `json:"modifications,omitempty"`
	AskDetails         *acs.AskDetails       `json:"ask_details,omitempty"`
	DeferDetails       *acs.DeferDetails     `json:"defer_details,omitempty"`

	// NDBuiltinCache is the JSON encoding of the results of every
	// non-deterministic built-in the evaluation called (time.now_ns,
	// rand.intn, uuid.rfc4122...). Replay needs it to reproduce the
	// decision exactly. It is evidence for the Guardian to store, not part
	// of the wire result, so it is not marshaled.
	NDBuiltinCache []byte `json:"-"`
}

// ErrBadDecision is wrapped by the error Decide returns when the policy's
// output is not a well-formed decision. The Guardian must not act on such
// output (ACS §6.3: an ill-formed MODIFY is a DENY at the agent).
var ErrBadDecision = errors.New("policy produced an ill-formed decision")

// policyOutput is what a bundle's decision rule must produce: the ACS
// result fields, with rule_ids in place of policy_references (the engine
// adds the bundle's ID and version to each).
type policyOutput struct {
	Decision           Disposition        `json:"decision"`
	Reasoning          string             `json:"reasoning"`
	ReasonCodes        []string           `json:"reason_codes"`
	RuleIDs            []string           `json:"rule_ids"`
	PolicyData         json.RawMessage    `json:"policy_data"`
	CitedProvenanceIDs []string           `json:"cited_provenance_ids"`
	Modifications      *acs.Modifications `json:"modifications"`
	AskDetails         *acs.AskDetails    `json:"ask_details"`
	DeferDetails       *acs.DeferDetails  `json:"defer_details"`
}

// decisionFromOutput checks raw, the JSON of a decision rule's value,
// against the decision contract and builds the Decision. params is the
// decoded request params, against which redaction paths must resolve. The
// error does not wrap ErrBadDecision; callers add context and wrap it.
func decisionFromOutput(raw []byte, b *Bundle, params any) (*Decision, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var out policyOutput
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("not a decision object: %v", err)
	}
	switch {
	case !out.Decision.Valid():
		return nil, fmt.Errorf("decision %q is not one of allow, deny, modify, ask, defer", out.Decision)
	case len(out.RuleIDs) == 0:
		return nil, errors.New("rule_ids is empty: every decision must name the rules that fired")
	case out.Decision != acs.Allow && out.Reasoning == "":
		return nil, fmt.Errorf("a %s decision needs reasoning (ACS §6)", out.Decision)
	}
	if err := uniqueNonEmpty("rule_ids", out.RuleIDs); err != nil {
		return nil, err
	}
	if err := uniqueNonEmpty("reason_codes", out.ReasonCodes); err != nil {
		return nil, err
	}
	if err := uniqueNonEmpty("cited_provenance_ids", out.CitedProvenanceIDs); err != nil {
		return nil, err
	}
	if p := bytes.TrimSpace(out.PolicyData); len(p) > 0 && p[0] != '{' {
		return nil, errors.New("policy_data is not an object")
	}
	if err := checkDetails(&out, params); err != nil {
		return nil, err
	}
	d := &Decision{
		Disposition:        out.Decision,
		Reasoning:          out.Reasoning,
		ReasonCodes:        out.ReasonCodes,
		PolicyData:         out.PolicyData,
		CitedProvenanceIDs: out.CitedProvenanceIDs,
		Modifications:      out.Modifications,
		AskDetails:         out.AskDetails,
		DeferDetails:       out.DeferDetails,
	}
	for _, r := range out.RuleIDs {
		d.PolicyReferences = append(d.PolicyReferences, acs.PolicyReference{PolicyID: b.ID, PolicyVersion: b.Version, RuleID: r})
	}
	return d, nil
}

func uniqueNonEmpty(field string, ss []string) error {
	for i, s := range ss {
		if s == "" {
			return fmt.Errorf("%s[%d] is empty", field, i)
		}
		if slices.Contains(ss[:i], s) {
			return fmt.Errorf("%s lists %q twice", field, s)
		}
	}
	return nil
}

// checkDetails enforces that each disposition carries exactly its own
// payload (ACS §6 "required fields") and fills timeout_decision's default.
func checkDetails(out *policyOutput, params any) error {
	if out.Modifications != nil && out.Decision != acs.Modify {
		return fmt.Errorf("modifications on a %s decision", out.Decision)
	}
	if out.AskDetails != nil && out.Decision != acs.Ask {
		return fmt.Errorf("ask_details on a %s decision", out.Decision)
	}
	if out.DeferDetails != nil && out.Decision != acs.Defer {
		return fmt.Errorf("defer_details on a %s decision", out.Decision)
	}
	switch out.Decision {
	case acs.Modify:
		if out.Modifications == nil {
			return errors.New("a modify decision needs modifications (ACS §6)")
		}
		return checkModifications(out.Modifications, params)
	case acs.Ask:
		a := out.AskDetails
		if a == nil {
			return errors.New("an ask decision needs ask_details (ACS §6)")
		}
		if a.Approver.Type == "" || a.Approver.ID == "" {
			return errors.New("ask_details.approver needs a type and an id (ACS §9)")
		}
	case acs.Defer:
		d := out.DeferDetails
		switch {
		case d == nil:
			return errors.New("a defer decision needs defer_details (ACS §6)")
		case d.ResolutionMethod == "":
			return errors.New("defer_details.resolution_method is empty (ACS §6)")
		case d.ResolutionTimeoutMS <= 0:
			return errors.New("defer_details.resolution_timeout_ms must be positive (ACS §6)")
		case d.Reason != "" && !slices.Contains(acs.DeferReasons, d.Reason):
			return fmt.Errorf("defer_details.reason %q is not one of %s", d.Reason, strings.Join(acs.DeferReasons, ", "))
		}
		// ACS §6: timeout_decision defaults to deny, the opposite of
		// on_decision_failure's default, so an unresolved DEFER fails closed.
		switch d.TimeoutDecision {
		case "":
			d.TimeoutDecision = acs.Deny
		case acs.Allow, acs.Deny:
		default:
			return fmt.Errorf("defer_details.timeout_decision %q is neither allow nor deny", d.TimeoutDecision)
		}
	}
	return nil
}

// checkModifications enforces ACS §6.3: modified_content excludes
// path-addressed edits, redaction and override targets are disjoint (no
// target equal to, an ancestor of, or a descendant of another), and every
// redaction path is a JSON pointer that addresses a string in params.
// Override keys are JSON pointers when they start with "/", otherwise tool
// argument names, addressing /payload/arguments/<name>.
func checkModifications(m *acs.Modifications, params any) error {
	if m.ModifiedContent != nil {
		if len(m.Redactions) > 0 || len(m.ParameterOverrides) > 0 {
			return errors.New("modified_content must not be combined with redactions or parameter_overrides (ACS §6.3)")
		}
		return nil
	}
	if len(m.Redactions) == 0 && len(m.ParameterOverrides) == 0 {
		return errors.New("modifications is empty (ACS §6.3)")
	}
	var targets [][]string
	for i, r := range m.Redactions {
		toks, err := parsePointer(r.Path)
		if err != nil {
			return fmt.Errorf("redactions[%d].path: %v", i, err)
		}
		v, ok := resolvePointer(params, toks)
		if !ok {
			return fmt.Errorf("redactions[%d].path %q addresses nothing in the request params", i, r.Path)
		}
		if _, isString := v.(string); !isString {
			return fmt.Errorf("redactions[%d].path %q addresses a non-string value", i, r.Path)
		}
		targets = append(targets, toks)
	}
	for key := range m.ParameterOverrides {
		t, err := overrideTarget(key)
		if err != nil {
			return fmt.Errorf("parameter_overrides key %q: %v", key, err)
		}
		targets = append(targets, t)
	}
	for i := range targets {
		for j := range i {
			if prefixOf(targets[i], targets[j]) || prefixOf(targets[j], targets[i]) {
				return fmt.Errorf("modification targets /%s and /%s overlap (ACS §6.3 requires disjoint targets)",
					strings.Join(targets[j], "/"), strings.Join(targets[i], "/"))
			}
		}
	}
	return nil
}

// overrideTarget is what a parameter_overrides key replaces: a key that
// starts with "/" is a JSON pointer into the params, any other key names a
// tool argument, /payload/arguments/<key>.
func overrideTarget(key string) ([]string, error) {
	if strings.HasPrefix(key, "/") {
		return parsePointer(key)
	}
	if key == "" {
		return nil, errors.New("empty key")
	}
	return []string{"payload", "arguments", key}, nil
}

func prefixOf(a, b []string) bool {
	return len(a) <= len(b) && slices.Equal(a, b[:len(a)])
}

// parsePointer splits an RFC 6901 JSON pointer into unescaped tokens.
func parsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, errors.New("empty JSON pointer addresses the whole params")
	}
	if p[0] != '/' {
		return nil, fmt.Errorf("JSON pointer %q does not start with /", p)
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, fmt.Errorf("JSON pointer %q has a bad ~ escape", p)
			}
		}
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks, nil
}

func resolvePointer(v any, toks []string) (any, bool) {
	for _, t := range toks {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[t]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(x) || (len(t) > 1 && t[0] == '0') {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// Diff compares two decisions field by field, as an incident responder asks
// "would this policy decide the same today?". It returns nil when they are
// the same decision, otherwise one line per differing field, naming the
// field and both values. The ND built-in cache is evaluation evidence, not
// part of the verdict, and is not compared.
func Diff(a, b *Decision) []string {
	var out []string
	add := func(field string, x, y any) {
		xj, _ := json.Marshal(x)
		yj, _ := json.Marshal(y)
		if !bytes.Equal(xj, yj) {
			out = append(out, fmt.Sprintf("%s: %s != %s", field, xj, yj))
		}
	}
	add("decision", a.Disposition, b.Disposition)
	add("reasoning", a.Reasoning, b.Reasoning)
	add("reason_codes", a.ReasonCodes, b.ReasonCodes)
	add("policy_references", a.PolicyReferences, b.PolicyReferences)
	add("policy_data", canonicalOrRaw(a.PolicyData), canonicalOrRaw(b.PolicyData))
	add("cited_provenance_ids", a.CitedProvenanceIDs, b.CitedProvenanceIDs)
	add("modifications", a.Modifications, b.Modifications)
	add("ask_details", a.AskDetails, b.AskDetails)
	add("defer_details", a.DeferDetails, b.DeferDetails)
	return out
}

// canonicalOrRaw lets Diff ignore member order and spacing in policy_data.
func canonicalOrRaw(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	return v
}
