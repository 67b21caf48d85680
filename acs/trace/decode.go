package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Parsed is one exported event read back, as a sink delivered it or as the
// pull API answered it.
type Parsed struct {
	Format Format
	// Cursor is the pull API's cursor when the line was a {cursor, event}
	// line, else "".
	Cursor string
	// Handle is the event's evidence handle.
	Handle Handle
	// Finding is true for an OCSF Detection Finding (the second event of
	// a deny, modify, ask or defer decision).
	Finding bool
	// Event is the event object itself.
	Event json.RawMessage
	// Progress is true for a pull API line that holds no event (a
	// heartbeat): only Cursor is set.
	Progress bool

	doc map[string]any
}

// Parse reads one event: a bare OCSF, CloudEvents or acs event, or a pull
// API line {"cursor": ..., "event": {...}}, or the pull API's progress
// line {"cursor": ..., "heartbeat": ...} (Progress). Its error says what is wrong
// with the line; the caller adds where the line is.
func Parse(line []byte) (*Parsed, error) {
	var top map[string]json.RawMessage
	if err := strictUnmarshal(line, &top); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	p := &Parsed{Event: line}
	if _, ok := top["heartbeat"]; ok {
		// The pull API's progress line, {"cursor", "heartbeat"}: no event.
		for k := range top {
			if k != "cursor" && k != "heartbeat" {
				return nil, fmt.Errorf("a heartbeat line with member %q", k)
			}
		}
		_ = json.Unmarshal(top["cursor"], &p.Cursor)
		p.Progress, p.Event = true, nil
		return p, nil
	}
	if ev, ok := top["event"]; ok && len(top) == 2 {
		if err := json.Unmarshal(top["cursor"], &p.Cursor); err != nil || p.Cursor == "" {
			return nil, errors.New(`a {cursor, event} line needs a non-empty string "cursor"`)
		}
		p.Event = ev
	}
	doc, err := decodeAny(p.Event)
	if err != nil {
		return nil, fmt.Errorf("event: %w", err)
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New("the event is not a JSON object")
	}
	p.doc = m
	var handle any
	switch {
	case m["specversion"] != nil:
		p.Format = CloudEvents
		if sv, _ := m["specversion"].(string); sv != "1.0" {
			return nil, fmt.Errorf("CloudEvents specversion %v, want \"1.0\"", m["specversion"])
		}
		handle = path(m, "data", "acsledger")
	case m["class_uid"] != nil:
		// metadata.version tells the OCSF encodings apart: 1.5.0 is
		// ocsf@1.5's, any other the default's.
		p.Format = OCSF
		if v, _ := path(m, "metadata", "version").(string); v == OCSF15Version {
			p.Format = OCSF15
		}
		p.Finding = fmt.Sprint(m["class_uid"]) == "2004"
		handle = path(m, "unmapped", "acsledger")
	case m["acsledger"] != nil && m["entry"] != nil:
		p.Format = ACS
		handle = m["acsledger"]
	default:
		return nil, errors.New("neither an OCSF event (class_uid), a CloudEvent (specversion) nor an acs event (acsledger, entry)")
	}
	hm, ok := handle.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s event without its evidence handle (acsledger)", p.Format)
	}
	if err := readHandle(hm, &p.Handle); err != nil {
		return nil, fmt.Errorf("%s event: evidence handle: %w", p.Format, err)
	}
	return p, nil
}

func readHandle(m map[string]any, h *Handle) error {
	var ok bool
	if h.SessionID, ok = m["session_id"].(string); !ok || h.SessionID == "" {
		return errors.New("no session_id")
	}
	if h.EntryHash, ok = m["entry_hash"].(string); !ok || h.EntryHash == "" {
		return errors.New("no entry_hash")
	}
	n, ok := m["position"].(json.Number)
	pos, err := n.Int64()
	if !ok || err != nil || pos < 0 {
		return fmt.Errorf("position %v is not a non-negative integer", m["position"])
	}
	h.Position = pos
	if li, ok := m["leaf_index"].(json.Number); ok {
		u, err := strconv.ParseUint(string(li), 10, 64)
		if err != nil {
			return fmt.Errorf("leaf_index %v is not a non-negative integer", li)
		}
		h.LeafIndex = &u
	}
	h.Source, _ = m["source"].(string)
	h.Origin, _ = m["origin"].(string)
	h.Receipt, _ = m["receipt"].(string)
	if c, ok := m["checkpoint"].(map[string]any); ok {
		cp := &Checkpoint{}
		cp.Origin, _ = c["origin"].(string)
		cp.RootHash, _ = c["root_hash"].(string)
		n, _ := c["size"].(json.Number)
		size, err := strconv.ParseUint(string(n), 10, 64)
		if err != nil || cp.Origin == "" || cp.RootHash == "" {
			return errors.New("checkpoint needs an origin, a size (a non-negative integer) and a root_hash")
		}
		cp.Size = size
		h.Checkpoint = cp
	}
	return nil
}

// Context returns the Evidence fields an event states that its entry does
// not (origin, source, leaf index, the agent when the entry names none,
// the commit time standing in for a missing timestamp), for re-encoding the
// ledger's entry to compare with the event. Entry, Response and Params are
// left for the caller.
func (p *Parsed) Context() Evidence {
	ev := Evidence{Origin: p.Handle.Origin, SessionID: p.Handle.SessionID, Position: p.Handle.Position,
		EntryHash: p.Handle.EntryHash, LeafIndex: p.Handle.LeafIndex, Source: p.Handle.Source, Checkpoint: p.Handle.Checkpoint}
	switch p.Format {
	case OCSF, OCSF15:
		ev.AgentID, _ = path(p.doc, "actor", "user", "uid").(string)
		if n, ok := p.doc["time"].(json.Number); ok {
			if ms, err := n.Int64(); err == nil {
				ev.Committed = time.UnixMilli(ms).UTC()
			}
		}
	case CloudEvents:
		if s, ok := p.doc["time"].(string); ok {
			ev.Committed, _ = time.Parse(time.RFC3339Nano, s)
		}
	}
	return ev
}

// Response returns the signed response the event carries (acs and
// CloudEvents), nil when none.
func (p *Parsed) Response() json.RawMessage {
	var r any
	switch p.Format {
	case ACS:
		r = p.doc["response"]
	case CloudEvents:
		r = path(p.doc, "data", "response")
	}
	if r == nil {
		return nil
	}
	b, _ := json.Marshal(r)
	return b
}

// Compare re-encodes ev in p's format and returns "" when the event says
// the same, or the first member (a dotted path) where it differs. Members
// made from the step's params (which the verifier does not hold) are left
// out of the comparison; member order, whitespace and number spelling do
// not matter.
func (p *Parsed) Compare(ev Evidence) (string, error) {
	member, _, _, err := p.CompareValues(ev)
	return member, err
}

// CompareValues is Compare that also returns the ledger's value and the
// event's at the member that differs, as compact JSON ("" when absent).
func (p *Parsed) CompareValues(ev Evidence) (member, want, got string, err error) {
	evs, err := EncodeAll(p.Format, ev, Options{})
	if err != nil {
		return "", "", "", err
	}
	i := 0
	if p.Finding {
		if len(evs) < 2 {
			return "class_uid", "", "2004", nil
		}
		i = 1
	}
	w, err := decodeAny(evs[i])
	if err != nil {
		return "", "", "", err
	}
	g := cloneWithout(p.doc, p.Format)
	// The entry's chain links are optional in an event: the ledger stores
	// an entry's content apart from its entry_hash (which the handle
	// carries) and previous_hash (the previous position's entry_hash), and
	// the export gives the content. A link the event does carry must be
	// the ledger's.
	if ep := entryPaths[p.Format]; ep != nil {
		we, _ := path(w, ep...).(map[string]any)
		ge, _ := path(g, ep...).(map[string]any)
		if we != nil && ge != nil {
			for _, link := range []string{"entry_hash", "previous_hash"} {
				if _, ok := ge[link]; !ok {
					delete(we, link)
				}
			}
		}
	}
	var d differ
	member = d.diff("", w, g)
	return member, jsonOf(d.want), jsonOf(d.got), nil
}

// entryPaths is where each format holds the entry.
var entryPaths = map[Format][]string{
	OCSF:        {"unmapped", "acs", "entry"},
	OCSF15:      {"unmapped", "acs", "entry"},
	CloudEvents: {"data", "entry"},
	ACS:         {"entry"},
}

func jsonOf(v any) string {
	if v == nil {
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// differ remembers the values where diff found the first difference.
type differ struct{ want, got any }

// paramPaths are the members an encoding makes from params.
var paramPaths = map[Format][][]string{
	OCSF:        {{"unmapped", "acs", "params"}, {"process", "name"}},
	OCSF15:      {{"unmapped", "acs", "params"}, {"process", "name"}},
	CloudEvents: {{"data", "params"}},
	ACS:         {{"params"}},
}

func cloneWithout(doc map[string]any, f Format) any {
	b, _ := json.Marshal(doc)
	c, _ := decodeAny(b)
	for _, pp := range paramPaths[f] {
		parent, _ := path(c, pp[:len(pp)-1]...).(map[string]any)
		if parent != nil {
			delete(parent, pp[len(pp)-1])
		}
	}
	return c
}

func path(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func decodeAny(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

func strictUnmarshal(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// diff returns the first path where got differs from want, "" if none.
func (df *differ) diff(at string, want, got any) string {
	df.want, df.got = want, got
	name := func(k string) string {
		if at == "" {
			return k
		}
		return at + "." + k
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return orRoot(at)
		}
		keys := make([]string, 0, len(w)+len(g))
		for k := range w {
			keys = append(keys, k)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			gv, gok := g[k]
			wv, wok := w[k]
			if gok != wok {
				df.want, df.got = wv, gv
				return name(k)
			}
			if d := df.diff(name(k), wv, gv); d != "" {
				return d
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return orRoot(at)
		}
		for i := range w {
			if d := df.diff(at+"["+strconv.Itoa(i)+"]", w[i], g[i]); d != "" {
				return d
			}
		}
		return ""
	case json.Number:
		g, ok := got.(json.Number)
		if !ok {
			return orRoot(at)
		}
		if w == g {
			return ""
		}
		wf, err1 := strconv.ParseFloat(string(w), 64)
		gf, err2 := strconv.ParseFloat(string(g), 64)
		if err1 != nil || err2 != nil || wf != gf || math.IsInf(wf, 0) {
			return orRoot(at)
		}
		if strings.ContainsAny(string(w)+string(g), ".eE") {
			return "" // the same double spelled two ways
		}
		return orRoot(at) // two integers that only a double confuses
	default:
		if want != got {
			return orRoot(at)
		}
		return ""
	}
}

func orRoot(at string) string {
	if at == "" {
		return "(the whole event)"
	}
	return at
}

// Attestation is one attestation of an OCSF 1.9 event's attestation_list
// (the record_integrity profile), as read back; members the event lacks
// stay zero.
type Attestation struct {
	UID, AuthorityUID, ChainUID string
	// FingerprintAlgorithmID is fingerprint.algorithm_id (3 is SHA-256),
	// -1 when absent or not an integer; Fingerprint is fingerprint.value.
	FingerprintAlgorithmID int64
	Fingerprint            string
}

// Integrity returns the attestations of the event's attestation_list and
// whether metadata.profiles names record_integrity. Its error says how
// attestation_list is malformed (not an array of objects).
func (p *Parsed) Integrity() (list []Attestation, profiled bool, err error) {
	if ps, ok := path(p.doc, "metadata", "profiles").([]any); ok {
		profiled = slices.Contains(ps, any("record_integrity"))
	}
	raw, ok := p.doc["attestation_list"]
	if !ok {
		return nil, profiled, nil
	}
	arr, ok := raw.([]any)
	if !ok {
		return nil, profiled, errors.New("attestation_list is not an array")
	}
	for i, it := range arr {
		m, ok := it.(map[string]any)
		if !ok {
			return nil, profiled, fmt.Errorf("attestation_list[%d] is not an object", i)
		}
		a := Attestation{FingerprintAlgorithmID: -1}
		a.UID, _ = m["uid"].(string)
		a.AuthorityUID, _ = m["authority_uid"].(string)
		a.ChainUID, _ = m["chain_uid"].(string)
		if fp, ok := m["fingerprint"].(map[string]any); ok {
			a.Fingerprint, _ = fp["value"].(string)
			if n, ok := fp["algorithm_id"].(json.Number); ok {
				if id, err := n.Int64(); err == nil {
					a.FingerprintAlgorithmID = id
				}
			}
		}
		list = append(list, a)
	}
	return list, profiled, nil
}
