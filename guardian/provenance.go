package guardian

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
)

// maxSessionProvenance bounds the provenance objects a session keeps for
// its policy; past it, new objects are not kept (the policy then sees the
// oldest lineage, which is what taint tracking needs most).
const maxSessionProvenance = 4096

// ProvenanceLog keeps the provenance objects (ACS §7) of a session's
// committed steps, each provenance_id once, in the order first seen, with
// the derived_from links between them, so that the lineage of a step is
// found by following those links rather than by handing the policy the
// whole log. The Guardian keeps one per session and grows it as steps
// commit; replay (guardian/replay) and resume rebuild it from the stored
// params of a session's steps, in chain order. The zero value is empty.
type ProvenanceLog struct {
	index map[string]int    // provenance_id -> position in objs
	objs  []json.RawMessage // each object as first seen
	from  [][]string        // the string members of objs[i]'s derived_from
}

// Add records every object found under a "provenance" or
// "parser_provenance" member anywhere in payload (a step's params.payload)
// that has a string provenance_id.
func (l *ProvenanceLog) Add(payload json.RawMessage) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return
	}
	l.walk(v)
}

// Len is the number of objects kept.
func (l *ProvenanceLog) Len() int { return len(l.objs) }

// walk is Add over a payload already decoded.
func (l *ProvenanceLog) walk(v any) {
	switch v := v.(type) {
	case map[string]any:
		// Members in sorted order, so that the objects of one payload are
		// kept in the same order every time (and replay rebuilds it).
		for _, k := range slices.Sorted(maps.Keys(v)) {
			c := v[k]
			if k == "provenance" || k == "parser_provenance" {
				l.keep(c)
			}
			l.walk(c)
		}
	case []any:
		for _, c := range v {
			l.walk(c)
		}
	}
}

func (l *ProvenanceLog) keep(v any) {
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	id, ok := m["provenance_id"].(string)
	if !ok || len(l.objs) >= maxSessionProvenance {
		return
	}
	if _, seen := l.index[id]; seen {
		return
	}
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	if l.index == nil {
		l.index = map[string]int{}
	}
	l.index[id] = len(l.objs)
	l.objs = append(l.objs, b)
	l.from = append(l.from, derivedFrom(m, nil))
}

// Lineage returns the provenance the Guardian shows a policy
// (Input.Provenance) for a step with these params (decoded JSON) under
// this Intent: the kept objects reachable over derived_from from the
// step's own provenance, first seen first. The step's own provenance is
// every object under a "provenance" or "parser_provenance" member anywhere
// in params, and the Intent's parser_provenance; an object is reached when
// one of those, or a reached object, has its provenance_id as its own id
// or in its derived_from.
//
// A policy that follows lineage from the step's provenance, as the
// baseline's flow rules do, sees every object it would have found in the
// whole log, and its decision is the same (TestLineageDecidesAsWholeLog);
// the cost of a step depends on its lineage, not on the session's length.
func (l *ProvenanceLog) Lineage(params any, intent *Intent) []json.RawMessage {
	if len(l.objs) == 0 {
		return nil
	}
	ids := stepProvenanceIDs(params, nil)
	if intent != nil && len(intent.ParserProvenance) > 0 {
		var pp any
		if json.Unmarshal(intent.ParserProvenance, &pp) == nil {
			ids = stepProvenanceIDs(map[string]any{"parser_provenance": pp}, ids)
		}
	}
	// An object whose provenance_id is empty makes the policy input
	// invalid (policy.ErrBadInput), so every later step of its session
	// fails to be decided, fail closed, whether or not its lineage reaches
	// the object; handed over always, it keeps doing so.
	if _, ok := l.index[""]; ok {
		ids = append(ids, "")
	}
	var reached []int
	seen := map[int]bool{}
	for len(ids) > 0 {
		id := ids[len(ids)-1]
		ids = ids[:len(ids)-1]
		i, ok := l.index[id]
		if !ok || seen[i] {
			continue
		}
		seen[i] = true
		reached = append(reached, i)
		ids = append(ids, l.from[i]...)
	}
	if len(reached) == 0 {
		return nil
	}
	slices.Sort(reached)
	out := make([]json.RawMessage, len(reached))
	for k, i := range reached {
		out[k] = l.objs[i]
	}
	return out
}

// stepProvenanceIDs appends to ids the provenance_id and the derived_from
// members of every object under a "provenance" or "parser_provenance"
// member of v. Ids that are not strings are skipped, but the derived_from
// of an object with one still count: a policy may follow them.
func stepProvenanceIDs(v any, ids []string) []string {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			if m, ok := c.(map[string]any); ok && (k == "provenance" || k == "parser_provenance") {
				if id, ok := m["provenance_id"].(string); ok {
					ids = append(ids, id)
				}
				ids = derivedFrom(m, ids)
			}
			ids = stepProvenanceIDs(c, ids)
		}
	case []any:
		for _, c := range v {
			ids = stepProvenanceIDs(c, ids)
		}
	}
	return ids
}

// derivedFrom appends the string members of m's derived_from to ids.
func derivedFrom(m map[string]any, ids []string) []string {
	df, _ := m["derived_from"].([]any)
	for _, d := range df {
		if s, ok := d.(string); ok {
			ids = append(ids, s)
		}
	}
	return ids
}

// StepProvenance returns the provenance the Guardian shows a policy
// (Input.Provenance) for a step with these params and Intent, after a
// session's steps with these payloads (params.payload of each step, in
// chain order) were committed: ProvenanceLog.Lineage of the log they make.
// Replay uses it to rebuild the input of a recorded step from the stored
// params of the earlier ones.
func StepProvenance(payloads []json.RawMessage, params json.RawMessage, intent *Intent) []json.RawMessage {
	var l ProvenanceLog
	for _, p := range payloads {
		l.Add(p)
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.UseNumber()
	if dec.Decode(&doc) != nil {
		doc = nil
	}
	return l.Lineage(doc, intent)
}

// provenanceSummary is provenance-summary.json at the entry level (ACS
// §8.3): the origins of the Provenance objects that entered at one step.
// All its fields are optional; the Guardian fills the origin counts.
type provenanceSummary struct {
	OriginsSeen        []string       `json:"origins_seen"`
	EntryCount         int            `json:"entry_count"`
	EntryCountByOrigin map[string]int `json:"entry_count_by_origin,omitempty"`
}

// origins are the values of Provenance.origin (ACS §7), the only keys
// provenance-summary.json allows.
var origins = []string{"user_input", "system", "tool_output", "retrieved", "agent_generated", "a2a_inbound", "external"}

// summarizeProvenance summarizes every Provenance object (a "provenance"
// or "parser_provenance" member with a string origin) in payload, a
// step's params.payload decoded. ACS-Audit deployments SHOULD populate
// provenance_summary on every ContextEntry (conformance, ACS-Audit).
func summarizeProvenance(payload any) *provenanceSummary {
	sum := &provenanceSummary{OriginsSeen: []string{}}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				if m, ok := c.(map[string]any); ok && (k == "provenance" || k == "parser_provenance") {
					if o, ok := m["origin"].(string); ok && slices.Contains(origins, o) {
						sum.EntryCount++
						if sum.EntryCountByOrigin == nil {
							sum.EntryCountByOrigin = map[string]int{}
						}
						sum.EntryCountByOrigin[o]++
					}
				}
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(payload)
	sum.OriginsSeen = slices.Sorted(maps.Keys(sum.EntryCountByOrigin))
	if sum.OriginsSeen == nil {
		sum.OriginsSeen = []string{}
	}
	return sum
}
