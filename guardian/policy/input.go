package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/util"
)

// ErrBadInput is wrapped by the error Decide returns for an Input it cannot
// evaluate.
var ErrBadInput = errors.New("bad policy input")

// Input is what the policy layer decides on (ACS §12.1): the request
// envelope's method and params, the session context, the session's Intent
// and the provenance the Guardian knows. The policy sees it as the input
// document
//
//	{"method": ..., "params": ..., "session": {...}, "intent": {...},
//	 "provenance": {"<provenance_id>": {...}, ...}}
type Input struct {
	// Method is the request's method (steps/toolCallRequest,
	// protocols/MCP/tools/call, ...).
	Method string
	// Params is the request's params exactly as received; it must be a
	// JSON object.
	Params json.RawMessage
	// ParamsValue, when not nil, is Params already decoded (maps, slices,
	// strings, bools, nil and json.Number, as util.UnmarshalJSON decodes
	// them) and is used instead of decoding Params again. It is read, never
	// modified.
	ParamsValue map[string]any
	// Session is where the step sits.
	Session Session
	// Intent is the session's committed Intent (ACS §8.4), or nil.
	Intent *Intent
	// Grants are capabilities an approver granted for this request only
	// (ACS §9.1, intent_extension with scope this_request).
	Grants []string
	// Provenance holds provenance objects of earlier steps of the
	// session, so the policy can follow derived_from lineage (ACS §7) from
	// the step's own provenance to its sources. The Guardian hands over
	// the step's lineage among them (guardian.ProvenanceLog.Lineage).
	Provenance []Provenance
}

// Session is the session context of a step.
type Session struct {
	SessionID string `json:"session_id"`
	AgentID   string `json:"agent_id"`
	// Position is the 0-based index the step's ContextEntry will take in
	// the session's chain.
	Position int64 `json:"position"`
	// ChainHash is the chain head before this step, "" for the first.
	ChainHash string `json:"chain_hash,omitempty"`
	// Deferrals is how many DEFER decisions the session has had, for
	// policies that bound cascading deferrals (ACS §6).
	Deferrals int `json:"deferrals"`
	// ApproverCapable says whether the client can route an ASK to an
	// approver (ACS §9.2), when the Guardian knows; nil leaves it to the
	// policy's own data.
	ApproverCapable *bool `json:"approver_capable,omitempty"`
}

// Intent is ACS §8.4 Intent: the capability set authorized for the session.
type Intent struct {
	Raw              string      `json:"raw,omitempty"`
	Parsed           []string    `json:"parsed,omitempty"`
	ParserProvenance *Provenance `json:"parser_provenance,omitempty"`
	ScopeMode        string      `json:"scope_mode,omitempty"`
}

// Provenance is an ACS §7 provenance object.
type Provenance struct {
	ProvenanceID string   `json:"provenance_id"`
	Origin       string   `json:"origin"`
	SourceID     string   `json:"source_id,omitempty"`
	DerivedFrom  []string `json:"derived_from,omitempty"`
	Trust        string   `json:"trust,omitempty"`
}

func (p *Provenance) value() map[string]any {
	m := map[string]any{"provenance_id": p.ProvenanceID, "origin": p.Origin}
	if p.SourceID != "" {
		m["source_id"] = p.SourceID
	}
	if len(p.DerivedFrom) > 0 {
		m["derived_from"] = anySlice(p.DerivedFrom)
	}
	if p.Trust != "" {
		m["trust"] = p.Trust
	}
	return m
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// value builds the policy's input document and returns it with the decoded
// params, against which redaction paths are resolved.
func (in *Input) value() (ast.Value, any, error) {
	if in.Method == "" {
		return nil, nil, fmt.Errorf("%w: empty method", ErrBadInput)
	}
	var params any
	if in.ParamsValue != nil {
		params = in.ParamsValue
	} else if err := util.UnmarshalJSON(in.Params, &params); err != nil {
		return nil, nil, fmt.Errorf("%w: params of %s: %v", ErrBadInput, in.Method, err)
	}
	if _, ok := params.(map[string]any); !ok {
		return nil, nil, fmt.Errorf("%w: params of %s is not a JSON object", ErrBadInput, in.Method)
	}
	session := map[string]any{
		"session_id": in.Session.SessionID,
		"agent_id":   in.Session.AgentID,
		"position":   json.Number(fmt.Sprint(in.Session.Position)),
	}
	if in.Session.ChainHash != "" {
		session["chain_hash"] = in.Session.ChainHash
	}
	session["deferrals"] = json.Number(fmt.Sprint(in.Session.Deferrals))
	if in.Session.ApproverCapable != nil {
		session["approver_capable"] = *in.Session.ApproverCapable
	}
	doc := map[string]any{"method": in.Method, "params": params, "session": session}
	if in.Grants != nil {
		doc["grants"] = anySlice(in.Grants)
	}
	if it := in.Intent; it != nil {
		m := map[string]any{}
		if it.Raw != "" {
			m["raw"] = it.Raw
		}
		if it.Parsed != nil {
			m["parsed"] = anySlice(it.Parsed)
		}
		if it.ParserProvenance != nil {
			m["parser_provenance"] = it.ParserProvenance.value()
		}
		if it.ScopeMode != "" {
			m["scope_mode"] = it.ScopeMode
		}
		doc["intent"] = m
	}
	v, err := ast.InterfaceToValue(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	prov, err := provenanceObject(in.Provenance)
	if err != nil {
		return nil, nil, err
	}
	v.(ast.Object).Insert(ast.InternedTerm("provenance"), ast.NewTerm(prov))
	return v, params, nil
}

// Document returns the input document the policy evaluates, as JSON. Tests
// compare the documents of two paths to the policy (a live decision and its
// replay) to show that they give it the same input.
func (in *Input) Document() ([]byte, error) {
	v, _, err := in.value()
	if err != nil {
		return nil, err
	}
	x, err := ast.JSON(v)
	if err != nil {
		return nil, fmt.Errorf("couldn't convert the input document to JSON: %w", err)
	}
	return json.Marshal(x)
}

// provenanceObject is the input's provenance member: each object under its
// provenance_id.
func provenanceObject(ps []Provenance) (ast.Object, error) {
	terms := provenanceTerms.get(ps)
	obj := ast.NewObjectWithCapacity(len(ps))
	for i := range ps {
		id := ast.StringTerm(ps[i].ProvenanceID)
		if ps[i].ProvenanceID == "" {
			return nil, fmt.Errorf("%w: provenance[%d] has no provenance_id", ErrBadInput, i)
		}
		if obj.Get(id) != nil {
			return nil, fmt.Errorf("%w: provenance_id %q appears twice", ErrBadInput, ps[i].ProvenanceID)
		}
		obj.Insert(id, terms[i])
	}
	return obj, nil
}

// provenanceTerms caches the OPA form of provenance objects. The same
// objects of a session's earlier steps go to the policy on step after step
// (Input.Provenance), so each is converted once
// (BenchmarkDecideSessionProvenance). A term depends only on the object's
// content, which is its key here, and is never modified once made, so
// concurrent evaluations share it.
var provenanceTerms = termCache{m: map[string]*ast.Term{}}

// maxCachedProvenance bounds the cache; when full it starts again empty.
const maxCachedProvenance = 1 << 16

type termCache struct {
	mu sync.Mutex
	m  map[string]*ast.Term
}

// get returns the term of each of ps, converting only those not cached.
func (c *termCache) get(ps []Provenance) []*ast.Term {
	out := make([]*ast.Term, len(ps))
	keys := make([]string, len(ps))
	var miss []int
	c.mu.Lock()
	for i := range ps {
		keys[i] = ps[i].key()
		if t, ok := c.m[keys[i]]; ok {
			out[i] = t
		} else {
			miss = append(miss, i)
		}
	}
	c.mu.Unlock()
	if len(miss) == 0 {
		return out
	}
	for _, i := range miss {
		// A map of strings and string slices always converts.
		v, _ := ast.InterfaceToValue(ps[i].value())
		out[i] = ast.NewTerm(v)
	}
	c.mu.Lock()
	if len(c.m)+len(miss) > maxCachedProvenance {
		clear(c.m)
	}
	for _, i := range miss {
		c.m[keys[i]] = out[i]
	}
	c.mu.Unlock()
	return out
}

// key is an unambiguous encoding of p's content: every field with its
// length in front.
func (p *Provenance) key() string {
	var b strings.Builder
	field := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	field(p.ProvenanceID)
	field(p.Origin)
	field(p.SourceID)
	field(p.Trust)
	b.WriteString(strconv.Itoa(len(p.DerivedFrom)))
	for _, d := range p.DerivedFrom {
		field(d)
	}
	return b.String()
}

// probes are the inputs every bundle must decide on, well-formed, before it
// is loaded: a tool call and a user message.
var probes = []*Input{
	{
		Method: "steps/toolCallRequest",
		Params: json.RawMessage(`{"acs_version":"0.1.0","request_id":"00000000-0000-4000-8000-000000000001",` +
			`"timestamp":"2026-01-01T00:00:00Z","metadata":{"agent_id":"probe","session_id":"00000000-0000-4000-8000-000000000000"},` +
			`"payload":{"tool":{"name":"probe.echo"},"arguments":{"text":{"value":"hello","provenance":{"provenance_id":"p1","origin":"user_input"}}}}}`),
		Session: Session{SessionID: "00000000-0000-4000-8000-000000000000", AgentID: "probe", Position: 1},
	},
	{
		Method: "steps/userMessage",
		Params: json.RawMessage(`{"acs_version":"0.1.0","request_id":"00000000-0000-4000-8000-000000000002",` +
			`"timestamp":"2026-01-01T00:00:00Z","metadata":{"agent_id":"probe","session_id":"00000000-0000-4000-8000-000000000000"},` +
			`"payload":{"message":{"role":"user","content":"hello"}}}`),
		Session: Session{SessionID: "00000000-0000-4000-8000-000000000000", AgentID: "probe", Position: 2},
	},
}
