package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/web/access"
	"github.com/acsledger/acsledger/web/httpapi"
)

// The timeline's steps (docs/ui.md, "Timeline"): each entry of a session
// summarised for a person reading what the agent did: the tool and a
// short, redacted view of its arguments, the first words of a user
// message, the memory key, the decision with its reasoning, reason codes
// and policy references, and for ingested records their source, flags
// and source record. Pages are keyed by position, so the first page of a
// 100,000-entry session costs what the first page of a short one does.
//
// Request params (tool arguments, message text) are shown to the roles
// that may read params (paramRoles); a viewer gets the tool name only.

// paramRoles may read what a step's request params held.
var paramRoles = []access.Role{access.RoleAdmin, access.RoleAuditor}

// stepJSON is one step of the timeline.
type stepJSON struct {
	Position    int64           `json:"position"`
	StepID      string          `json:"step_id"`
	StepType    string          `json:"step_type"`
	Timestamp   string          `json:"timestamp,omitempty"`
	RecordedAt  time.Time       `json:"recorded_at"`
	EntryHash   string          `json:"entry_hash"`
	Decision    string          `json:"decision"`
	Reasoning   string          `json:"reasoning,omitempty"`
	ReasonCodes []string        `json:"reason_codes"`
	Policies    []policyRefJSON `json:"policy_refs"`
	Source      string          `json:"source"`
	Flags       []string        `json:"flags"`
	// SourceRecord is the start of an ingested record's exact source
	// text, for entries that hold it inline (ingested before migration
	// 0015); SourceKey and SourceSHA256 name the record of the entries
	// that commit to it by hash, kept beside them (docs/ingest.md).
	SourceRecord string `json:"source_record,omitempty"`
	SourceKey    string `json:"source_key,omitempty"`
	SourceSHA256 string `json:"source_sha256,omitempty"`
	Tool         string `json:"tool,omitempty"`
	// Args is a short view of the tool's arguments, secrets redacted.
	Args string `json:"args,omitempty"`
	// Message is the first words of a user message.
	Message   string `json:"message,omitempty"`
	MemoryKey string `json:"memory_key,omitempty"`
	// Subagent is "start" or "stop" for the steps that open and close a
	// subagent, whose steps the UI folds between them.
	Subagent string `json:"subagent,omitempty"`
	// Params says what the request params gave: "shown", "withheld" (the
	// role may not read them), "erased", or "none".
	Params string `json:"params"`
}

type policyRefJSON struct {
	PolicyID      string `json:"policy_id,omitempty"`
	PolicyVersion string `json:"policy_version,omitempty"`
	RuleID        string `json:"rule_id,omitempty"`
}

// listSteps answers a page of a session's timeline: from (a position)
// and limit, as listEntries takes them.
func (a *API) listSteps(w http.ResponseWriter, r *http.Request) {
	entries, err := a.entriesPage(r, httpapi.PathParam(r, "session_id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	p := access.PrincipalFrom(r.Context())
	showParams := p == nil || slices.Contains(paramRoles, p.Role)
	out := struct {
		Steps []stepJSON `json:"steps"`
	}{Steps: []stepJSON{}}
	for _, e := range entries {
		st := summarize(e)
		params, err := a.store.Request(r.Context(), e.SessionID, e.Position)
		switch {
		case errors.Is(err, ledger.ErrErased):
			st.Params = "erased"
		case errors.Is(err, ledger.ErrNotFound):
			st.Params = "none"
		case err != nil:
			a.fail(w, r, fmt.Errorf("couldn't read the params of session %s at %d: %w", e.SessionID, e.Position, err))
			return
		default:
			st.Params = "withheld"
			if showParams {
				st.Params = "shown"
			}
			describeParams(&st, params, showParams)
		}
		out.Steps = append(out.Steps, st)
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// summarize reads what the entry itself records.
func summarize(e ledger.Entry) stepJSON {
	st := stepJSON{
		Position: e.Position, StepID: e.StepID, StepType: e.StepType, Timestamp: e.Timestamp,
		RecordedAt: e.RecordedAt.UTC(), EntryHash: e.EntryHash.String(),
		ReasonCodes: []string{}, Policies: []policyRefJSON{}, Flags: []string{}, Source: "guardian",
	}
	var c struct {
		Decision     json.RawMessage `json:"decision"`
		Flags        []any           `json:"flags"`
		SourceFormat *string         `json:"source_format"`
		Source       any             `json:"source"`
		SourceRecord *string         `json:"source_record"`
		SourceKey    *string         `json:"source_key"`
		SourceSHA256 *string         `json:"source_sha256"`
	}
	if json.Unmarshal(e.Content, &c) != nil {
		return st
	}
	var d struct {
		Disposition      *string           `json:"disposition"`
		Decision         *string           `json:"decision"`
		Reasoning        *string           `json:"reasoning"`
		ReasonCodes      []any             `json:"reason_codes"`
		PolicyReferences []json.RawMessage `json:"policy_references"`
	}
	var bare string
	switch {
	case json.Unmarshal(c.Decision, &bare) == nil:
		st.Decision = bare
	case json.Unmarshal(c.Decision, &d) == nil:
		if d.Disposition != nil {
			st.Decision = *d.Disposition
		} else if d.Decision != nil {
			st.Decision = *d.Decision
		}
		if d.Reasoning != nil {
			st.Reasoning = *d.Reasoning
		}
		st.ReasonCodes = strs(d.ReasonCodes)
		for _, raw := range d.PolicyReferences {
			var ref acs.PolicyReference
			if json.Unmarshal(raw, &ref) == nil {
				st.Policies = append(st.Policies, policyRefJSON{ref.PolicyID, ref.PolicyVersion, ref.RuleID})
			}
		}
	}
	st.Flags = strs(c.Flags)
	if s, ok := c.Source.(string); ok {
		st.Source = s
	}
	if c.SourceFormat != nil {
		st.Source = *c.SourceFormat
	}
	if c.SourceRecord != nil {
		st.SourceRecord = clip(*c.SourceRecord, 300)
	}
	if c.SourceKey != nil {
		st.SourceKey = clip(*c.SourceKey, 300)
	}
	if c.SourceSHA256 != nil {
		st.SourceSHA256 = clip(*c.SourceSHA256, 64)
	}
	switch {
	case strings.HasSuffix(e.StepType, "subagentStart"):
		st.Subagent = "start"
	case strings.HasSuffix(e.StepType, "subagentStop"):
		st.Subagent = "stop"
	}
	return st
}

// strs keeps the strings of a JSON array.
func strs(vs []any) []string {
	out := []string{}
	for _, v := range vs {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// describeParams reads the tool, arguments, message and memory key from a
// step's request params (their payload, ACS hook schemas); only the tool
// name when show is false.
func describeParams(st *stepJSON, params []byte, show bool) {
	var p struct {
		Payload struct {
			Tool *struct {
				Name string `json:"name"`
			} `json:"tool"`
			Arguments map[string]json.RawMessage `json:"arguments"`
			Content   json.RawMessage            `json:"content"`
			MemoryID  string                     `json:"memory_id"`
			Key       string                     `json:"key"`
		} `json:"payload"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	if p.Payload.Tool != nil {
		st.Tool = p.Payload.Tool.Name
	}
	if !show {
		return
	}
	st.Args = argsView(p.Payload.Arguments)
	st.MemoryKey = p.Payload.MemoryID
	if st.MemoryKey == "" {
		st.MemoryKey = p.Payload.Key
	}
	if strings.HasSuffix(st.StepType, "userMessage") {
		st.Message = messageView(p.Payload.Content)
	}
}

// Short views: how much of each value the timeline shows.
const (
	argValueChars = 60
	argsChars     = 160
	messageWords  = 12
)

// secretName matches argument names whose values are never shown.
var secretName = regexp.MustCompile(`(?i)pass|secret|token|api[_-]?key|auth|credential|private`)

// secretValue matches values that look like credentials wherever they
// appear: AWS access key ids, bearer and API tokens, PEM keys, and long
// unbroken runs of token characters (base64 without "/", hex): a path
// with "/" stays readable.
var secretValue = regexp.MustCompile(`AKIA[0-9A-Z]{16}|(?i:bearer\s+)\S+|\b(?:sk|pk|ghp|gho|xox[bap]|acsl)[-_][A-Za-z0-9_\-]{10,}|-----BEGIN [A-Z ]*PRIVATE KEY-----|[A-Za-z0-9+=_\-]{40,}`)

// redact replaces what looks like a credential in s.
func redact(s string) string { return secretValue.ReplaceAllString(s, "[redacted]") }

// argsView is "name=value, ..." in name order, each value cut short and
// redacted. An ACS argument is {value, provenance}; the value is shown.
func argsView(args map[string]json.RawMessage) string {
	names := make([]string, 0, len(args))
	for n := range args {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		raw := args[n]
		var wrapped struct {
			Value json.RawMessage `json:"value"`
		}
		if json.Unmarshal(raw, &wrapped) == nil && len(wrapped.Value) > 0 {
			raw = wrapped.Value
		}
		var v string
		if json.Unmarshal(raw, &v) != nil {
			v = string(raw)
		}
		if secretName.MatchString(n) {
			v = "[redacted]"
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(n + "=" + clip(redact(v), argValueChars))
	}
	return clip(b.String(), argsChars)
}

// messageView is the first words of a user message's text parts,
// redacted.
func messageView(content json.RawMessage) string {
	var parts []struct {
		Type  string `json:"type"`
		Value any    `json:"value"`
	}
	if json.Unmarshal(content, &parts) != nil {
		return ""
	}
	var words []string
	for _, p := range parts {
		if s, ok := p.Value.(string); ok && p.Type == "text" {
			words = append(words, strings.Fields(redact(s))...)
		}
	}
	if len(words) > messageWords {
		return strings.Join(words[:messageWords], " ") + " …"
	}
	return strings.Join(words, " ")
}

// clip cuts s to at most n characters, marking the cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}
