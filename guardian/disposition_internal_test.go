package guardian

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/acs"
)

// TestCheckModifications covers the ACS §6.3 composition rules one case at
// a time.
func TestCheckModifications(t *testing.T) {
	s := func(v string) *string { return &v }
	ov := func(keys ...string) map[string]json.RawMessage {
		m := map[string]json.RawMessage{}
		for _, k := range keys {
			m[k] = json.RawMessage(`"x"`)
		}
		return m
	}
	red := func(paths ...string) []acs.Redaction {
		var r []acs.Redaction
		for _, p := range paths {
			r = append(r, acs.Redaction{Path: p})
		}
		return r
	}
	rows := []struct {
		name string
		m    *acs.Modifications
		err  string // "" means allowed
	}{
		{"nil", nil, "empty"},
		{"empty", &acs.Modifications{}, "empty"},
		{"modified_content alone", &acs.Modifications{ModifiedContent: s("")}, ""},
		{"modified_content with redactions", &acs.Modifications{ModifiedContent: s("x"), Redactions: red("/a")}, "must not be combined"},
		{"modified_content with overrides", &acs.Modifications{ModifiedContent: s("x"), ParameterOverrides: ov("a")}, "must not be combined"},
		{"redactions alone", &acs.Modifications{Redactions: red("/payload/arguments/a/value", "/payload/arguments/a/value")}, ""},
		{"overrides alone", &acs.Modifications{ParameterOverrides: ov("a", "b")}, ""},
		{"disjoint", &acs.Modifications{Redactions: red("/payload/arguments/body/value", "/payload/content/0/value"), ParameterOverrides: ov("to", "cc")}, ""},
		{"same field", &acs.Modifications{Redactions: red("/payload/arguments/to"), ParameterOverrides: ov("to")}, "overlapping"},
		{"redaction below override", &acs.Modifications{Redactions: red("/payload/arguments/to/value"), ParameterOverrides: ov("to")}, "overlapping"},
		{"redaction above override", &acs.Modifications{Redactions: red("/payload/arguments"), ParameterOverrides: ov("to")}, "overlapping"},
		{"pointer override overlapping", &acs.Modifications{Redactions: red("/payload/query"), ParameterOverrides: ov("/payload/query/text")}, "overlapping"},
		{"pointer override disjoint", &acs.Modifications{Redactions: red("/payload/query/a"), ParameterOverrides: ov("/payload/query/b")}, ""},
		{"prefix by characters is not an ancestor", &acs.Modifications{Redactions: red("/payload/arguments/to2"), ParameterOverrides: ov("to")}, ""},
		{"escaped slash in argument name", &acs.Modifications{Redactions: red("/payload/arguments/a~1b"), ParameterOverrides: ov("a/b")}, "overlapping"},
		{"escaped tilde", &acs.Modifications{Redactions: red("/payload/arguments/a~0b/value"), ParameterOverrides: ov("a~b")}, "overlapping"},
		{"redaction of the whole payload", &acs.Modifications{Redactions: red("")}, "modified_content"},
		{"redaction path without slash", &acs.Modifications{Redactions: red("arguments/a")}, `starts with "/"`},
		{"bad escape", &acs.Modifications{Redactions: red("/a~2")}, "RFC 6901"},
		{"empty override key", &acs.Modifications{ParameterOverrides: ov("")}, "empty argument name"},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			err := checkModifications(r.m)
			switch {
			case r.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case r.err != "" && (err == nil || !strings.Contains(err.Error(), r.err)):
				t.Fatalf("err = %v, want one containing %q", err, r.err)
			}
		})
	}
}

func TestFieldPath(t *testing.T) {
	for in, want := range map[string]string{
		"":                            "the request",
		"/params/metadata/session_id": "params.metadata.session_id",
		"/params/payload/content/0":   "params.payload.content[0]",
		"/params/payload/a~1b":        "params.payload.a/b",
	} {
		if got := fieldPath(in); got != want {
			t.Errorf("fieldPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCompatible(t *testing.T) {
	for v, want := range map[string]bool{"0.1.0": true, "0.1.7": true, "0.2.0": false, "1.1.0": false, "0.1": false} {
		if got := compatible(v); got != want {
			t.Errorf("compatible(%q) = %v, want %v", v, got, want)
		}
	}
}
