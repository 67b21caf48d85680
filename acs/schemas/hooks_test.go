package schemas_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/acs/schemas"
)

// hookPayloads holds, for each hook payload schema we have, a payload
// with every data-bearing field; %P marks where a client that produces
// provenance puts it. Without it, the payload is what a client that
// declared provenance_producer "none" sends (ACS §7, ACS-Core).
var hookPayloads = map[string]string{
	"hooks/user-message.json":             `{"content":[{"type":"text","value":"hi"%P}]}`,
	"hooks/agent-response.json":           `{"content":[{"type":"text","value":"hello"%P}]}`,
	"hooks/knowledge-retrieval.json":      `{"query":{"value":"q"%P},"results":[{"value":"doc"%P}]}`,
	"hooks/memory-context-retrieval.json": `{"results":[{"value":"m"%P}]}`,
	"hooks/memory-store.json":             `{"content":{"value":"remember"%P}}`,
	"hooks/tool-call-request.json":        `{"tool":{"name":"read_file"},"arguments":{"path":{"value":"/tmp/a"%P}}}`,
	"hooks/tool-call-result.json":         `{"tool":{"name":"read_file"},"exit_status":"success","outputs":[{"value":"text"%P}]}`,
	"hooks/pre-compact.json":              `{"entries_to_compact":["s1"],"triggered_by":"size_threshold"}`,
	"hooks/post-compact.json":             `{"summary":{"value":"sum"%P},"entries_compacted":["s1"],"pre_compact_chain_hash":"` + strings.Repeat("0", 64) + `","post_compact_chain_hash":"` + strings.Repeat("0", 64) + `"}`,
	"hooks/subagent-stop.json":            `{"subagent_session_id":"0b6b2d9e-3f5c-4d1e-9a7b-2c8d4e6f8a0b","outcome":"completed","summary":{"value":"done"%P}}`,
	"hooks/turn-end.json":                 `{"turn_id":"t1","outcome":"completed","summary":{"value":"did it"%P}}`,
}

// withProvenance fills each %P of doc with a Provenance object of its own
// id.
func withProvenance(doc string) []byte {
	for i := 0; strings.Contains(doc, "%P"); i++ {
		doc = strings.Replace(doc, "%P", fmt.Sprintf(`,"provenance":{"provenance_id":"p%d","origin":"user_input"}`, i), 1)
	}
	return []byte(doc)
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
			payload, ok := hookPayloads[name]
			if !ok {
				t.Fatalf("no payload for %s", name)
			}
			doc := strings.ReplaceAll(payload, "%P", "")
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
			with := withProvenance(payload)
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
		bj, _ := json.Marshal(b)
		oj, _ := json.Marshal(o)
		if string(bj) != dropRequiredProvenance(string(oj)) {
			t.Errorf("%s: the base differs from the official copy in more than provenance's place in required", name)
		}
	}
}

var requiredList = regexp.MustCompile(`"required":\[[^\]]*\]`)

// dropRequiredProvenance removes "provenance" from every required list of
// a schema in json.Marshal form.
func dropRequiredProvenance(doc string) string {
	return requiredList.ReplaceAllStringFunc(doc, func(l string) string {
		l = strings.ReplaceAll(l, `,"provenance"`, "")
		l = strings.ReplaceAll(l, `"provenance",`, "")
		return strings.ReplaceAll(l, `"provenance"`, "")
	})
}
