package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
)

// DefaultOPASessionPath is where an OPA decision names its session.
const DefaultOPASessionPath = "input.session_id"

// OPAMapper maps OPA decision-log events. The zero value uses
// DefaultOPASessionPath and maps no subject.
type OPAMapper struct {
	// SessionPath is a dotted path into the event ("input.session_id",
	// "labels.session"); its value, a non-empty string, names the
	// session. Events without one go to one session per OPA instance,
	// "opa:" + labels.id.
	SessionPath string
	// SubjectPath, when set, is a dotted path into the event's input or
	// labels ("input.user", "labels.tenant"; CheckOPASubjectPath) whose
	// value, a non-empty string, is the decision's subject: the agent id
	// of its session, which `acsledger erase --agent` and retention rules
	// and holds match. An event without a value there has no subject.
	SubjectPath string
}

// CheckOPASubjectPath refuses a subject path that is not a dotted path
// into the event's input ("input.user", "input.subject.id") or one of its
// labels ("labels.tenant"), naming what is wrong.
func CheckOPASubjectPath(path string) error {
	parts := strings.Split(path, ".")
	for i, p := range parts {
		if p == "" {
			return fmt.Errorf("subject path %q: part %d is empty (want a dotted path such as input.user or labels.NAME)", path, i+1)
		}
	}
	switch {
	case parts[0] == "input" && len(parts) >= 2:
	case parts[0] == "labels" && len(parts) == 2:
	case parts[0] == "labels":
		return fmt.Errorf("subject path %q: a label is one name, labels.NAME (labels are strings)", path)
	default:
		return fmt.Errorf("subject path %q: want a member of the decision's input (input.user, input.subject.id) or a label (labels.NAME)", path)
	}
	return nil
}

// opaEvent is an OPA decision-log event (OPA's logs.EventV1 as
// uploaded). Values that are arbitrary JSON stay raw, so that their
// numbers (nd_builtin_cache holds time.now_ns, above 2^53) are never
// decoded into float64.
type opaEvent struct {
	Labels         map[string]string    `json:"labels"`
	DecisionID     *string              `json:"decision_id"`
	Path           string               `json:"path"`
	Query          string               `json:"query"`
	Input          json.RawMessage      `json:"input"`
	Result         json.RawMessage      `json:"result"`
	Bundles        map[string]opaBundle `json:"bundles"`
	Revision       string               `json:"revision"`
	Erased         []string             `json:"erased"`
	Masked         []string             `json:"masked"`
	NDBuiltinCache json.RawMessage      `json:"nd_builtin_cache"`
	Timestamp      *string              `json:"timestamp"`
}

type opaBundle struct {
	Revision string `json:"revision"`
}

// opaEntry is the ContextEntry of one OPA decision.
type opaEntry struct {
	EntryID   string      `json:"entry_id"`
	StepID    string      `json:"step_id"`
	StepType  string      `json:"step_type"`
	Timestamp string      `json:"timestamp"`
	Decision  opaDecision `json:"decision"`
	sourceRef
}

// opaDecision keeps what OPA wrote of the decision, not of its client:
// requested_by (the address of the client that asked OPA) and input stay
// in the source record only, sealed and erasable (docs/ingest.md).
// Entries ingested before this held requested_by; they stay as they are,
// and the verifier lists them (client_in_entry). Result is absent when
// the decision was undefined (OPA wrote no result member), and null only
// when OPA wrote null. NDBuiltinCache is the cache's exact JSON text, as a string, for
// the reason the Guardian stores its own that way: the ledger stores
// entries in RFC 8785 form, which would turn integers above 2^53 into
// doubles.
type opaDecision struct {
	DecisionID     string            `json:"decision_id"`
	Path           string            `json:"path,omitempty"`
	Query          string            `json:"query,omitempty"`
	Result         json.RawMessage   `json:"result,omitempty"`
	PolicyVersions []policyVersion   `json:"policy_versions"`
	Erased         []string          `json:"erased,omitempty"`
	Masked         []string          `json:"masked,omitempty"`
	NDBuiltinCache string            `json:"nd_builtin_cache,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
}

// policyVersion names the policy a decision was made under. It is not a
// policy_references member on purpose: the ledger does not hold the
// source's policy bundles, and the verifier resolves policy_references.
type policyVersion struct {
	PolicyID string `json:"policy_id"`
	Version  string `json:"version"`
}

// Map implements Mapper.
func (m OPAMapper) Map(_ context.Context, raw Raw) ledger.IngestRecord {
	if q := malformed(OPA, raw); q != nil {
		return *q
	}
	if t := firstByte(raw.Bytes); t != '{' {
		return quarantine(OPA, raw, "", ReasonSchemaInvalid, "an OPA decision event must be a JSON object")
	}
	ev, err := decodeOPAEvent(raw.Bytes)
	if err != nil {
		return quarantine(OPA, raw, "", ReasonSchemaInvalid, "not an OPA decision event: %v", err)
	}
	if ev.DecisionID == nil || *ev.DecisionID == "" {
		return quarantine(OPA, raw, "", ReasonSchemaInvalid, "the event has no decision_id")
	}
	key := *ev.DecisionID
	if ev.Timestamp == nil {
		return quarantine(OPA, raw, key, ReasonSchemaInvalid, "decision %s has no timestamp", key)
	}
	if _, err := time.Parse(time.RFC3339Nano, *ev.Timestamp); err != nil {
		return quarantine(OPA, raw, key, ReasonSchemaInvalid, "decision %s: timestamp %q is not RFC 3339", key, *ev.Timestamp)
	}
	session, err := m.session(raw.Bytes, *ev)
	if err != nil {
		return quarantine(OPA, raw, key, ReasonSchemaInvalid, "decision %s: %v", key, err)
	}
	subject, err := m.subject(raw.Bytes, *ev)
	if err != nil {
		return quarantine(OPA, raw, key, ReasonSchemaInvalid, "decision %s: %v", key, err)
	}
	d := opaDecision{
		DecisionID: key, Path: ev.Path, Query: ev.Query, Result: ev.Result,
		Erased: ev.Erased, Masked: ev.Masked, Labels: ev.Labels,
		PolicyVersions: []policyVersion{},
	}
	if len(ev.NDBuiltinCache) > 0 && string(ev.NDBuiltinCache) != "null" {
		d.NDBuiltinCache = string(ev.NDBuiltinCache)
	}
	names := make([]string, 0, len(ev.Bundles))
	for name := range ev.Bundles {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		d.PolicyVersions = append(d.PolicyVersions, policyVersion{PolicyID: name, Version: ev.Bundles[name].Revision})
	}
	if ev.Revision != "" && len(names) == 0 {
		// OPA before bundles were named wrote one revision.
		d.PolicyVersions = append(d.PolicyVersions, policyVersion{PolicyID: "", Version: ev.Revision})
	}
	entry, err := json.Marshal(opaEntry{
		EntryID: "opa:" + key, StepID: "opa:" + key, StepType: "ingest/opa/decision",
		Timestamp: *ev.Timestamp, Decision: d, sourceRef: newSourceRef(OPA, key, raw),
	})
	if err != nil {
		return quarantine(OPA, raw, key, ReasonSchemaInvalid, "decision %s: %v", key, err)
	}
	return ledger.IngestRecord{
		Source: string(OPA), Key: key, Digest: sha256.Sum256(raw.Bytes),
		File: raw.File, Record: raw.Record, Raw: raw.Bytes, KeepSource: true,
		Entry: ledger.Record{SessionID: session, AgentID: subject, Entry: entry},
	}
}

// session finds the event's session: the string at SessionPath, or the
// OPA instance's.
func (m OPAMapper) session(event []byte, ev opaEvent) (string, error) {
	path := m.SessionPath
	if path == "" {
		path = DefaultOPASessionPath
	}
	if v, found := lookup(event, ev, path); found && firstByte(v) != 'n' {
		var s string
		if err := json.Unmarshal(v, &s); err != nil || s == "" {
			return "", fmt.Errorf("the session at %s is not a non-empty string", path)
		}
		return s, nil
	}
	id := ev.Labels["id"]
	if id == "" {
		return "", fmt.Errorf("no session at %s and no labels.id naming the OPA instance", path)
	}
	return "opa:" + id, nil
}

// subject finds the event's subject, the string at SubjectPath: "" when
// none is mapped or the event has none there (absent, null or "").
func (m OPAMapper) subject(event []byte, ev opaEvent) (string, error) {
	if m.SubjectPath == "" {
		return "", nil
	}
	if err := CheckOPASubjectPath(m.SubjectPath); err != nil {
		return "", err // the flags check it; a library caller may not have
	}
	v, found := lookup(event, ev, m.SubjectPath)
	if !found || firstByte(v) == 'n' {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("the subject at %s is not a string", m.SubjectPath)
	}
	if len(s) > ledger.MaxAgentIDBytes {
		return "", fmt.Errorf("the subject at %s is longer than %d bytes", m.SubjectPath, ledger.MaxAgentIDBytes)
	}
	return s, nil
}

// lookup returns the value at a dotted path into the event, and whether
// there is one.
func lookup(event []byte, ev opaEvent, path string) (json.RawMessage, bool) {
	parts := strings.Split(path, ".")
	// The first step is taken from the decoded event where it can be,
	// which spares decoding the whole event again.
	var v json.RawMessage
	found := true
	switch parts[0] {
	case "input":
		v, found = ev.Input, len(ev.Input) > 0
		parts = parts[1:]
	case "labels":
		if len(parts) == 2 {
			s, ok := ev.Labels[parts[1]]
			b, _ := json.Marshal(s)
			v, found = b, ok
			parts = nil
		}
	}
	if v == nil && found {
		v = json.RawMessage(event)
	}
	for _, part := range parts {
		if !found {
			break
		}
		if v, found = member(v, part); !found {
			break
		}
	}
	return v, found
}

// firstByte returns the first non-space byte of b, or 0.
func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c
	}
	return 0
}

// member returns the value of the top-level member name of the JSON object
// obj, which must be valid JSON (the event passed acs.Canonicalize), without
// decoding the rest of it.
func member(obj []byte, name string) (v json.RawMessage, found bool) {
	acs.JSONMembers(obj, func(key, value []byte) bool {
		if keyIs(key, name) {
			v, found = value, true
		}
		return !found
	})
	return v, found
}

// keyIs compares a JSON member name, as written between its quotes, with
// name, unescaping only when needed.
func keyIs(key []byte, name string) bool {
	if bytes.IndexByte(key, '\\') < 0 {
		return string(key) == name // no allocation
	}
	k, err := unquote(key)
	return err == nil && k == name
}

// unquote decodes a JSON string as written between its quotes.
func unquote(s []byte) (string, error) {
	if bytes.IndexByte(s, '\\') < 0 {
		return string(s), nil
	}
	var k string
	err := json.Unmarshal(append(append([]byte{'"'}, s...), '"'), &k)
	return k, err
}

// decodeOPAEvent decodes the members of an event the mapping reads, in
// one pass over its top level: encoding/json would also decode input,
// which is most of the event and which the mapping only keeps. event must
// have passed acs.Canonicalize (no duplicate members, valid JSON).
func decodeOPAEvent(event []byte) (*opaEvent, error) {
	ev := new(opaEvent)
	err := eachMember(event, func(key string, v []byte) error {
		var err error
		switch key {
		case "decision_id":
			var s string
			s, err = jsonString(v)
			ev.DecisionID = &s
		case "timestamp":
			var s string
			s, err = jsonString(v)
			ev.Timestamp = &s
		case "path":
			ev.Path, err = jsonString(v)
		case "query":
			ev.Query, err = jsonString(v)
		case "revision":
			ev.Revision, err = jsonString(v)
		case "input":
			ev.Input = v
		case "result":
			ev.Result = v
		case "nd_builtin_cache":
			ev.NDBuiltinCache = v
		case "labels":
			ev.Labels, err = stringMap(v)
		case "bundles":
			ev.Bundles, err = opaBundles(v)
		case "erased":
			err = json.Unmarshal(v, &ev.Erased)
		case "masked":
			err = json.Unmarshal(v, &ev.Masked)
		}
		if err != nil {
			return fmt.Errorf("member %q: %w", key, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ev, nil
}

// stringMap decodes a JSON object of strings as encoding/json decodes it
// into a map[string]string (null is a nil map, a null member the empty
// string, any other value an error), without reflection: every OPA event
// has labels, and encoding/json's map decoding was a fifth of Map's CPU.
func stringMap(v []byte) (map[string]string, error) {
	return objectMap(v, func(_ string, v []byte) (string, error) {
		if string(v) == "null" {
			return "", nil
		}
		return jsonString(v)
	})
}

// opaBundles decodes the bundles member as encoding/json decodes it into a
// map[string]opaBundle: each bundle an object (or null) whose revision
// member, matched without regard to case as encoding/json matches a
// field, is a string or null; its other members are ignored.
func opaBundles(v []byte) (map[string]opaBundle, error) {
	return objectMap(v, func(name string, v []byte) (opaBundle, error) {
		var b opaBundle
		if string(v) == "null" {
			return b, nil
		}
		err := eachMember(v, func(key string, v []byte) error {
			if !strings.EqualFold(key, "revision") || string(v) == "null" {
				return nil
			}
			var err error
			b.Revision, err = jsonString(v)
			return err
		})
		if err != nil {
			return b, fmt.Errorf("bundle %q: %w", name, err)
		}
		return b, nil
	})
}

// objectMap decodes a JSON object as encoding/json decodes it into a
// map[string]V, each member's value by elem: null is a nil map.
func objectMap[V any](v []byte, elem func(name string, v []byte) (V, error)) (map[string]V, error) {
	if string(v) == "null" {
		return nil, nil
	}
	m := make(map[string]V)
	err := eachMember(v, func(name string, v []byte) error {
		e, err := elem(name, v)
		m[name] = e
		return err
	})
	return m, err
}

// eachMember calls fn with every top-level member of the JSON object obj
// (valid JSON), its key unescaped and its value's exact bytes.
func eachMember(obj []byte, fn func(key string, v []byte) error) error {
	var err error
	ok := acs.JSONMembers(obj, func(name, v []byte) bool {
		var key string
		if key, err = unquote(name); err == nil {
			err = fn(key, v)
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("not a JSON object")
	}
	return nil
}

// jsonString decodes a JSON string value, refusing any other type.
func jsonString(v []byte) (string, error) {
	if len(v) < 2 || v[0] != '"' {
		return "", fmt.Errorf("want a string, got %.20s", v)
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), nil
	}
	var s string
	err := json.Unmarshal(v, &s)
	return s, err
}
