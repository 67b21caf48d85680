package schemas_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/acs/schemas"
)

// noProvenance holds, for each hook payload schema we have, a payload a
// client that declared provenance_producer "none" sends: every
// data-bearing field, no provenance anywhere (ACS §7, ACS-Core).
var noProvenance = map[string]string{
	"hooks/user-message.json":             `{"content":[{"type":"text","value":"hi"}]}`,
	"hooks/agent-response.json":           `{"content":[{"type":"text","value":"hello"}]}`,
	"hooks/knowledge-retrieval.json":      `{"query":{"value":"q"},"results":[{"value":"doc"}]}`,
	"hooks/memory-context-retrieval.json": `{"results":[{"value":"m"}]}`,
	"hooks/memory-store.json":             `{"content":{"value":"remember"}}`,
	"hooks/tool-call-request.json":        `{"tool":{"name":"read_file"},"arguments":{"path":{"value":"/tmp/a"}}}`,
	"hooks/tool-call-result.json":         `{"tool":{"name":"read_file"},"exit_status":"success","outputs":[{"value":"text"}]}`,
	"hooks/pre-compact.json":              `{"entries_to_compact":["s1"],"triggered_by":"size_threshold"}`,
	"hooks/post-compact.json":             `{"summary":{"value":"sum"},"entries_compacted":["s1"],"pre_compact_chain_hash":"` + strings.Repeat("0", 64) + `","post_compact_chain_hash":"` + strings.Repeat("0", 64) + `"}`,
	"hooks/subagent-stop.json":            `{"subagent_session_id":"0b6b2d9e-3f5c-4d1e-9a7b-2c8d4e6f8a0b","outcome":"completed","summary":{"value":"done"}}`,
	"hooks/turn-end.json":                 `{"turn_id":"t1","outcome":"completed","summary":{"value":"did it"}}`,
}

// TestBaseHookSchemasLeaveProvenanceOptional: the base hook schemas accept
// an ACS-Core payload without provenance, the ACS-Provenance variants
// refuse the same payload wherever the strict copy requires provenance,
// and a payload with provenance passes both (ACS §7; conformance,
// ACS-Core and ACS-Provenance).
func TestBaseHookSchemasLeaveProvenanceOptional(t *testing.T) {
	for _, name := range schemas.Names() {
		if !strings.HasPrefix(name, "hooks/") || strings.HasSuffix(name, ".acs-provenance.json") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			doc, ok := noProvenance[name]
			if !ok {
				t.Fatalf("no provenance-free payload for %s", name)
			}
			if err := schemas.Validate(name, []byte(doc)); err != nil {
				t.Fatalf("base schema refuses a payload without provenance: %v", err)
			}
			strict := schemas.Strict(name)
			if strict == "" || !schemas.Derived(name) {
				t.Fatalf("%s has no ACS-Provenance variant", name)
			}
			if name == "hooks/pre-compact.json" {
				// No data-bearing field: nothing to require.
				return
			}
			if err := schemas.Validate(strict, []byte(doc)); err == nil {
				t.Fatalf("%s accepts a payload without provenance", strict)
			}
			with := addProvenance(t, doc)
			for _, n := range []string{name, strict} {
				if err := schemas.Validate(n, with); err != nil {
					t.Errorf("%s refuses a payload with provenance: %v\n%s", n, err, with)
				}
			}
		})
	}
}

// TestStrictHookSchemasAreTheOfficialCopies: each ACS-Provenance variant is
// the official copy byte for byte, and the base differs from it only in
// the required lists, which lose "provenance" and nothing else.
func TestStrictHookSchemasAreTheOfficialCopies(t *testing.T) {
	files, err := filepath.Glob("official/hooks/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("official hook schemas: %v %v", files, err)
	}
	for _, f := range files {
		name := "hooks/" + filepath.Base(f)
		official, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		strict, err := schemas.Source(schemas.Strict(name))
		if err != nil || !bytes.Equal(strict, official) {
			t.Errorf("%s: the strict variant is not the official copy (%v)", name, err)
		}
		base, err := schemas.Source(name)
		if err != nil {
			t.Fatal(err)
		}
		var b, o map[string]any
		if json.Unmarshal(base, &b) != nil || json.Unmarshal(official, &o) != nil {
			t.Fatalf("%s: not JSON", name)
		}
		if c, _ := b["$comment"].(string); !strings.Contains(c, "Not an official ACS file") {
			t.Errorf("%s: $comment does not say it is derived: %q", name, c)
		}
		delete(b, "$comment")
		delete(o, "$comment")
		if !reflect.DeepEqual(b, withoutProvenanceRequired(o)) {
			t.Errorf("%s: the base differs from the official copy in more than provenance's place in required", name)
		}
	}
}

func withoutProvenanceRequired(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, c := range v {
			if req, ok := c.([]any); ok && k == "required" {
				out[k] = slices.DeleteFunc(slices.Clone(req), func(x any) bool { return x == "provenance" })
				continue
			}
			out[k] = withoutProvenanceRequired(c)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, c := range v {
			out[i] = withoutProvenanceRequired(c)
		}
		return out
	}
	return v
}

// addProvenance puts a Provenance object beside every "value" member.
func addProvenance(t *testing.T, doc string) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatal(err)
	}
	n := 0
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, c := range v {
				walk(c)
			}
			if _, ok := v["value"]; ok {
				n++
				v["provenance"] = map[string]any{"provenance_id": "p" + strings.Repeat("x", n), "origin": "user_input"}
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(v)
	b, _ := json.Marshal(v)
	return b
}
