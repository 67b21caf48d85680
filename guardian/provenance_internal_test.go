package guardian

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
)

// TestLineage checks which kept objects ProvenanceLog.Lineage hands a
// policy for a step, and in what order; opapolicy's
// TestLineageDecidesAsWholeLog checks that the baseline decides on them as
// on the whole log.
func TestLineage(t *testing.T) {
	obj := func(id, origin string, from ...string) map[string]any {
		o := map[string]any{"provenance_id": id, "origin": origin}
		if from != nil {
			// As decoded JSON holds it.
			var df []any
			for _, f := range from {
				df = append(df, f)
			}
			o["derived_from"] = df
		}
		return o
	}
	arg := func(p any) map[string]any {
		return map[string]any{"payload": map[string]any{"arguments": map[string]any{"x": map[string]any{"value": "v", "provenance": p}}}}
	}
	// The session: a <- b <- c, a cycle d <-> e, and x, y, z unrelated.
	session := []map[string]any{
		obj("a", "retrieved"), obj("x", "tool_output"), obj("b", "agent_generated", "a"),
		obj("d", "agent_generated", "e"), obj("e", "agent_generated", "d"), obj("c", "agent_generated", "b", "never-seen"),
		obj("y", "user_input", "z"), obj("z", "retrieved"),
	}
	for _, c := range []struct {
		name   string
		params any
		intent *Intent
		want   []string
	}{
		{"no provenance in the step", map[string]any{"payload": map[string]any{"text": "hi"}}, nil, nil},
		{"a chain, first seen first", arg(obj("new", "agent_generated", "c")), nil, []string{"a", "b", "c"}},
		{"an id the session holds", arg(obj("b", "user_input")), nil, []string{"a", "b"}},
		{"a cycle", arg(obj("new", "agent_generated", "e")), nil, []string{"d", "e"}},
		{"unknown ids", arg(obj("new", "agent_generated", "nobody", "nothing")), nil, nil},
		{"an id that is not a string still leads", arg(map[string]any{"provenance_id": 7, "derived_from": []any{"z", 3}}), nil, []string{"z"}},
		{"parser_provenance in the params", map[string]any{"payload": map[string]any{"intent": map[string]any{"parser_provenance": obj("new", "agent_generated", "x")}}}, nil, []string{"x"}},
		{"the Intent's parser_provenance", arg(obj("new", "user_input")), &Intent{ParserProvenance: json.RawMessage(`{"provenance_id":"y","origin":"user_input"}`)}, []string{"y", "z"}},
		{"nested deep in a result", map[string]any{"payload": map[string]any{"result": []any{map[string]any{"items": []any{map[string]any{"provenance": obj("c", "tool_output")}}}}}}, nil, []string{"a", "b", "c"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var l ProvenanceLog
			for _, o := range session {
				b, _ := json.Marshal(map[string]any{"item": map[string]any{"provenance": o}})
				l.Add(b)
			}
			var got []string
			for _, raw := range l.Lineage(c.params, c.intent) {
				var p struct {
					ID string `json:"provenance_id"`
				}
				if err := json.Unmarshal(raw, &p); err != nil {
					t.Fatal(err)
				}
				got = append(got, p.ID)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("lineage %q, want %q", got, c.want)
			}
		})
	}
}

// TestLineageEdges: objects past the cap are not kept, so no lineage
// reaches them; an object with an empty provenance_id is always handed
// over, so that the policy input stays refused (fail closed) as it was
// when the whole log was.
func TestLineageEdges(t *testing.T) {
	var l ProvenanceLog
	var items []any
	for i := range maxSessionProvenance + 1 {
		items = append(items, map[string]any{"provenance": map[string]any{"provenance_id": fmt.Sprint("p-", i), "origin": "retrieved"}})
	}
	b, _ := json.Marshal(items)
	l.Add(b)
	if l.Len() != maxSessionProvenance {
		t.Fatalf("kept %d objects, want %d", l.Len(), maxSessionProvenance)
	}
	step := map[string]any{"provenance": map[string]any{"provenance_id": "s", "derived_from": []any{"p-0", fmt.Sprint("p-", maxSessionProvenance)}}}
	if got := l.Lineage(step, nil); len(got) != 1 || string(got[0]) != `{"origin":"retrieved","provenance_id":"p-0"}` {
		t.Errorf("lineage past the cap: %s", got)
	}

	var e ProvenanceLog
	e.Add(json.RawMessage(`{"a":{"provenance":{"provenance_id":"","origin":"retrieved"}},"b":{"provenance":{"provenance_id":"q","origin":"retrieved"}}}`))
	if got := e.Lineage(map[string]any{"text": "no provenance"}, nil); len(got) != 1 || string(got[0]) != `{"origin":"retrieved","provenance_id":""}` {
		t.Errorf("lineage with an empty provenance_id in the session: %s", got)
	}
}
