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

// provenanceLog keeps the provenance objects (ACS §7) of a session's
// committed steps, each provenance_id once, in the order first seen.
type provenanceLog struct {
	ids  map[string]bool
	objs []json.RawMessage
}

// add records every object found under a "provenance" or
// "parser_provenance" member anywhere in doc that has a string
// provenance_id.
func (l *provenanceLog) add(doc json.RawMessage) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return
	}
	l.walk(v)
}

func (l *provenanceLog) walk(v any) {
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

func (l *provenanceLog) keep(v any) {
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	id, ok := m["provenance_id"].(string)
	if !ok || l.ids[id] || len(l.objs) >= maxSessionProvenance {
		return
	}
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	if l.ids == nil {
		l.ids = map[string]bool{}
	}
	l.ids[id] = true
	l.objs = append(l.objs, b)
}

func (l *provenanceLog) snapshot() []json.RawMessage { return slices.Clone(l.objs) }

// SessionProvenance returns the provenance objects the Guardian shows a
// policy (Input.Provenance) after a session's steps with these payloads
// (params.payload of each step, in chain order) were committed: every
// object under a "provenance" or "parser_provenance" member with a string
// provenance_id, each id once, first seen first. Replay uses it to rebuild
// the input of a recorded step from the stored params of the earlier ones.
func SessionProvenance(payloads []json.RawMessage) []json.RawMessage {
	var l provenanceLog
	for _, p := range payloads {
		l.add(p)
	}
	return l.snapshot()
}
