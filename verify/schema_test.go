package verify_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/verify"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestBundleSchema validates every bundle of the corpus, and the trust
// file's keys, against docs/evidence-bundle.schema.json, and requires the
// schema to refuse bundles that break it.
func TestBundleSchema(t *testing.T) {
	t.Parallel()
	src := verify.ReadTestFile(t, "..", "docs", "evidence-bundle.schema.json")
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("evidence-bundle.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("evidence-bundle.schema.json")
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	keys, err := c.Compile("evidence-bundle.schema.json#/$defs/Keys")
	if err != nil {
		t.Fatalf("compile Keys: %v", err)
	}
	validate := func(s *jsonschema.Schema, b []byte) error {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return err
		}
		return s.Validate(v)
	}
	files := verify.GlobTestFiles(t, "testdata", "bundles", "*.json")
	n := 0
	for _, f := range files {
		b := verify.ReadTestFile(t, f)
		switch filepath.Base(f) {
		case "manifest.json":
			continue
		case "trust.json":
			if err := validate(keys, b); err != nil {
				t.Errorf("%s: %v", f, err)
			}
			continue
		}
		n++
		if err := validate(s, b); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if n < 10 {
		t.Fatalf("validated only %d bundles", n)
	}
	for name, bad := range map[string]string{
		"wrong version":  `{"format":"acsledger-evidence-bundle","version":2,"session_id":"s","entries":[{"entry_id":"a","step_id":"b","step_type":"c","entry_hash":"` + strings.Repeat("0", 64) + `"}]}`,
		"unknown member": `{"format":"acsledger-evidence-bundle","version":1,"session_id":"s","extra":1,"entries":[{"entry_id":"a","step_id":"b","step_type":"c","entry_hash":"` + strings.Repeat("0", 64) + `"}]}`,
		"no entries":     `{"format":"acsledger-evidence-bundle","version":1,"session_id":"s","entries":[]}`,
		"bad proof hash": `{"format":"acsledger-evidence-bundle","version":1,"session_id":"s","anchors":[{"position":0,"leaf_index":0,"tree_size":1,"proof":["AAAA"]}],"entries":[{"entry_id":"a","step_id":"b","step_type":"c","entry_hash":"` + strings.Repeat("0", 64) + `"}]}`,
	} {
		if err := validate(s, []byte(bad)); err == nil {
			t.Errorf("%s: schema accepts %s", name, bad)
		}
	}
}
