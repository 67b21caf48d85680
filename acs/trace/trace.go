// Package trace encodes ledger entries as the events other tools read: OCSF
// 1.9 events by the ACS-Trace mapping with the record_integrity profile (or
// OCSF 1.5 events, as before, on request), CloudEvents 1.0 in structured JSON
// mode, or the entry and its signed response as stored. It is pure (no
// ledger, no network), so the offline verifier uses the same code to check a
// SIEM's copy of the events against an evidence bundle.
//
// Every event carries its evidence handle (session, position, entry hash,
// Merkle leaf index once anchored) so that any event can be found again in
// the ledger and checked. Request params never leave unless the caller's
// [Options] allow it, and then only the tool name and the allowed argument
// keys. docs/export.md describes each encoding.
//
// [ACS-Trace]: https://genai-security-project.github.io/agent-control-standard/schema/v0.1.0/trace/ocsf-mapping.json
// [OCSF 1.9]: https://schema.ocsf.io/1.9.0/
// [OCSF 1.5]: https://schema.ocsf.io/1.5.0/
// [CloudEvents 1.0]: https://github.com/cloudevents/spec/blob/v1.0.2/cloudevents/formats/json-format.md
package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/acsledger/acsledger/acs"
)

// Format names an encoding of exported events.
type Format string

// The encodings. OCSF is the default: OCSF 1.9 with the record_integrity
// profile. OCSF15 is the OCSF 1.5 encoding exactly as acsledger wrote it
// before 1.9, byte for byte, for receivers that have not moved.
const (
	OCSF        Format = "ocsf"
	OCSF15      Format = "ocsf@1.5"
	CloudEvents Format = "cloudevents"
	ACS         Format = "acs"
)

// Formats lists the encodings, default first.
var Formats = []Format{OCSF, OCSF15, CloudEvents, ACS}

// ParseFormat returns the Format named by s; "" is the default, OCSF.
// "ocsf@1.9" names OCSF too, so that a configuration can pin it.
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case "", OCSF, "ocsf@1.9":
		return OCSF, nil
	case OCSF15, CloudEvents, ACS:
		return Format(s), nil
	}
	return "", fmt.Errorf("unknown event format %q (want ocsf, ocsf@1.9, ocsf@1.5, cloudevents or acs)", s)
}

// IsOCSF reports whether f is one of the OCSF encodings.
func (f Format) IsOCSF() bool { return f == OCSF || f == OCSF15 }

// Evidence is one ledger entry with what the ledger knows about it.
type Evidence struct {
	// Origin is the ledger's log origin (the checkpoint's first line); it
	// is the CloudEvents source.
	Origin    string
	SessionID string
	// AgentID is the session's agent, "" when the ledger knows none. An
	// entry's own agent_id member, when it has one, is used instead.
	AgentID   string
	Position  int64
	EntryHash string  // lowercase hex
	LeafIndex *uint64 // Merkle leaf index once anchored, else nil
	// Source is "guardian" or the ingest format ("opa", "bash-guard",
	// "bash-guard-audit", "a2h", "acs", ...).
	Source   string
	Entry    json.RawMessage // the entry as stored
	Response json.RawMessage // its signed response, nil when none
	// Params are the step's decrypted request params, nil unless the sink
	// may see them (and always nil once erased). Only what Options allow
	// of them is encoded.
	Params json.RawMessage
	// Committed is when the ledger appended the entry; it stands in for
	// the event time when the entry has no valid timestamp. Zero if unknown.
	Committed time.Time
	// Checkpoint is a checkpoint of the log that covers the entry's leaf
	// (Size > *LeafIndex), nil when the caller knows none. Only OCSF 1.9
	// events carry it (unmapped.acsledger.checkpoint).
	Checkpoint *Checkpoint

	entrySource string // the entry's source_format, set by view
}

// Options say what of a step's request params may leave in an event. The
// zero value lets nothing leave: params are sealed at rest and an event
// sink is one more copy.
type Options struct {
	// AllowTools lets the tool name (params payload.tool.name) leave.
	AllowTools bool
	// AllowArgKeys lets the values of these argument keys (params
	// payload.arguments.KEY.value) leave; other arguments never do.
	AllowArgKeys []string
}

// Encode returns the main event of ev in format f as one JSON object with no
// trailing newline. For OCSF that is the step's event; a deny, modify, ask
// or defer decision has a second event, the Detection Finding, which
// [EncodeAll] returns too.
func Encode(f Format, ev Evidence, opt Options) ([]byte, error) {
	evs, err := encode(f, &ev, opt, false)
	if err != nil {
		return nil, err
	}
	return evs[0], nil
}

// EncodeAll returns every event of ev in format f, in order: the step's
// event first, then, for OCSF and a deny, modify, ask or defer decision,
// its Detection Finding (class 2004). CloudEvents and acs have one event
// per entry.
func EncodeAll(f Format, ev Evidence, opt Options) ([][]byte, error) {
	return encode(f, &ev, opt, true)
}

// Checkpoint names one checkpoint of the log: its origin, its tree size and
// its root hash (lowercase hex), as the signed note states them.
type Checkpoint struct {
	Origin   string `json:"origin"`
	Size     uint64 `json:"size"`
	RootHash string `json:"root_hash"`
}

func encode(f Format, ev *Evidence, opt Options, all bool) ([][]byte, error) {
	v, err := view(ev)
	if err != nil {
		return nil, err
	}
	p := allowedParams(ev.Params, opt)
	switch f {
	case ACS:
		return [][]byte{encodeACS(ev, p)}, nil
	case CloudEvents:
		return [][]byte{encodeCloudEvent(ev, v, p)}, nil
	case OCSF, OCSF15, "":
		ver := ocsf19
		if f == OCSF15 {
			ver = ocsf15
		}
		out := [][]byte{encodeOCSF(ev, v, p, ver)}
		if all && v.finding() {
			out = append(out, encodeFinding(ev, v, p, ver))
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown event format %q (want ocsf, ocsf@1.5, cloudevents or acs)", f)
}

// Handle is the evidence handle every event carries (unmapped.acsledger in
// OCSF, data.acsledger in CloudEvents, acsledger in acs): where the entry
// is in the ledger.
type Handle struct {
	SessionID string  `json:"session_id"`
	Position  int64   `json:"position"`
	EntryHash string  `json:"entry_hash"`
	LeafIndex *uint64 `json:"leaf_index,omitempty"`
	Source    string  `json:"source,omitempty"`
	Origin    string  `json:"origin,omitempty"`
	// Receipt and Checkpoint are in OCSF 1.9 events only: the URL path of
	// the entry's receipt and a checkpoint that covers the entry, when the
	// encoder knew one.
	Receipt    string      `json:"receipt,omitempty"`
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
}

// ReceiptPath is the URL path of the receipt of the entry at position of
// session (docs/receipts.md): GET it with an auditor's token.
func ReceiptPath(session string, position int64) string {
	return "/api/v1/sessions/" + url.PathEscape(session) + "/entries/" + strconv.FormatInt(position, 10) + "/receipt"
}

// handle writes the evidence handle of the OCSF 1.5, CloudEvents and acs
// encodings.
func (ev *Evidence) handle(b *buf) {
	ev.handleMembers(b)
	b.close()
}

// handleIntegrity writes the evidence handle of OCSF 1.9: the handle with
// where its receipt is and, when known, the checkpoint that covers it.
func (ev *Evidence) handleIntegrity(b *buf) {
	ev.handleMembers(b)
	b.key("receipt").str(ReceiptPath(ev.SessionID, ev.Position))
	if cp := ev.Checkpoint; cp != nil {
		b.obj("checkpoint").key("origin").str(cp.Origin).key("size").uint(cp.Size).key("root_hash").str(cp.RootHash).close()
	}
	b.close()
}

func (ev *Evidence) handleMembers(b *buf) {
	b.open()
	b.key("session_id").str(ev.SessionID)
	b.key("position").int(ev.Position)
	b.key("entry_hash").str(ev.EntryHash)
	if ev.LeafIndex != nil {
		b.key("leaf_index").uint(*ev.LeafIndex)
	}
	if src := ev.source(); src != "" {
		b.key("source").str(src)
	}
	if ev.Origin != "" {
		b.key("origin").str(ev.Origin)
	}
}

// source is the ingest format the entry names (source_format), else the
// caller's Source: the entry's own member is what the chain commits to.
func (ev *Evidence) source() string {
	if ev.entrySource != "" {
		return ev.entrySource
	}
	return ev.Source
}

// entryView is what the encodings read from an entry. Members the entry
// lacks stay zero; raw members are JSON values as the entry holds them.
type entryView struct {
	EntryID, StepID, StepType, Timestamp string
	AgentID, TurnID                      string
	Decision                             struct {
		Disposition, Reasoning, Path  string
		ReasonCodes, PolicyReferences []byte
		PolicyVersions, RuleIDs       []byte
	}
	Resolution struct {
		Resolution, AgentID string
	}
	Capabilities      []byte
	SourceFormat      string
	ProvenanceSummary []byte

	entry json.RawMessage // compact
	time  int64           // Unix ms
	agent string
}

// view reads ev's entry with the tree's one member scanner (acs), after
// one validity pass: decoding into a struct would cost several times as
// much, and an export runs once per entry.
func view(ev *Evidence) (*entryView, error) {
	if len(ev.Entry) == 0 {
		return nil, fmt.Errorf("entry %s/%d: no entry", ev.SessionID, ev.Position)
	}
	if !json.Valid(ev.Entry) {
		return nil, fmt.Errorf("entry %s/%d: not valid JSON", ev.SessionID, ev.Position)
	}
	v := new(entryView)
	v.entry = compact(ev.Entry)
	d, r := &v.Decision, &v.Resolution
	ok := readMembers(v.entry, []member{
		{name: "entry_id", str: &v.EntryID},
		{name: "step_id", str: &v.StepID},
		{name: "step_type", str: &v.StepType},
		{name: "timestamp", str: &v.Timestamp},
		{name: "agent_id", str: &v.AgentID},
		{name: "turn_id", str: &v.TurnID},
		{name: "source_format", str: &v.SourceFormat},
		{name: "capabilities", raw: &v.Capabilities},
		{name: "provenance_summary", raw: &v.ProvenanceSummary},
		{name: "decision", obj: func(val []byte) {
			// An object, or, in entries other writers append, the bare
			// disposition ("decision": "allow").
			if len(val) > 0 && val[0] == '"' {
				d.Disposition = str(val)
				return
			}
			readMembers(val, []member{
				{name: "disposition", str: &d.Disposition},
				{name: "reasoning", str: &d.Reasoning},
				{name: "path", str: &d.Path},
				{name: "reason_codes", raw: &d.ReasonCodes},
				{name: "policy_references", raw: &d.PolicyReferences},
				{name: "policy_versions", raw: &d.PolicyVersions},
				{name: "rule_ids", raw: &d.RuleIDs},
			})
		}},
		{name: "resolution", obj: func(val []byte) {
			readMembers(val, []member{
				{name: "resolution", str: &r.Resolution},
				{name: "agent_id", str: &r.AgentID},
			})
		}},
	})
	if !ok {
		return nil, fmt.Errorf("entry %s/%d: not a JSON object", ev.SessionID, ev.Position)
	}
	if v.StepType == "" {
		return nil, fmt.Errorf("entry %s/%d: no step_type", ev.SessionID, ev.Position)
	}
	if len(ev.Response) > 0 {
		if !json.Valid(ev.Response) {
			return nil, fmt.Errorf("entry %s/%d: its response is not valid JSON", ev.SessionID, ev.Position)
		}
		ev.Response = compact(ev.Response)
	}
	if t, err := time.Parse(time.RFC3339Nano, v.Timestamp); err == nil {
		v.time = t.UnixMilli()
	} else if !ev.Committed.IsZero() {
		v.time = ev.Committed.UnixMilli()
	}
	ev.entrySource = v.SourceFormat
	// The entry's own agent_id wins: it is what the chain commits to.
	v.agent = v.AgentID
	if v.agent == "" {
		v.agent = ev.AgentID
	}
	if v.agent == "" {
		v.agent = v.Resolution.AgentID
	}
	return v, nil
}

// member says where view keeps one member of an object: the string it
// holds in str, the raw JSON value in raw, or the value handed to obj.
type member struct {
	name string
	str  *string
	raw  *[]byte
	obj  func(val []byte)
}

// readMembers reads the members of obj that ms name, with the tree's one
// member scanner (acs), and skips the others. It reports whether obj is a
// JSON object.
func readMembers(obj []byte, ms []member) bool {
	return acs.JSONMembers(obj, func(name, val []byte) bool {
		for i := range ms {
			m := &ms[i]
			if string(name) != m.name {
				continue
			}
			switch {
			case m.str != nil:
				*m.str = str(val)
			case m.raw != nil:
				*m.raw = val
			default:
				m.obj(val)
			}
			return true
		}
		return true
	})
}

// str returns the string a JSON value holds, "" for any other value.
func str(val []byte) string {
	if len(val) < 2 || val[0] != '"' {
		return ""
	}
	if bytes.IndexByte(val, '\\') < 0 {
		return string(val[1 : len(val)-1])
	}
	var s string
	if json.Unmarshal(val, &s) != nil {
		return ""
	}
	return s
}

// disposition is the entry's ACS disposition, "" when it records none (an
// OPA decision, an approver's resolution).
func (v *entryView) disposition() string {
	switch d := strings.ToLower(v.Decision.Disposition); d {
	case "allow", "deny", "modify", "ask", "defer":
		return d
	}
	return ""
}

// finding reports whether the entry's decision is also a Detection Finding
// (ocsf-mapping.json decision_class: deny, modify, ask, defer).
func (v *entryView) finding() bool {
	d := v.disposition()
	return d != "" && d != "allow"
}

// compact returns b without insignificant whitespace when it has any
// newline or carriage return, so that an event stays one NDJSON line.
// Stored entries are RFC 8785 and pass through unchanged.
func compact(b json.RawMessage) json.RawMessage {
	if bytes.IndexByte(b, '\n') < 0 && bytes.IndexByte(b, '\r') < 0 {
		return b
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return b
	}
	return out.Bytes()
}
