package verify_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/verify"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// payloadBundle chains entries (JSON objects without links) into a
// "steps" bundle, each step with the extra members of extras (JSON text
// after the entry, e.g. `,"source":"..."`).
func payloadBundle(t *testing.T, entries, extras []string) []byte {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"format":"acsledger-evidence-bundle","version":1,"session_id":"s","steps":[`)
	var prev *acs.Hash
	for i, e := range entries {
		pe, err := acs.ParseEntry([]byte(e))
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		h := acs.EntryHash(pe.Content, prev)
		links := fmt.Sprintf(`,"entry_hash":%q,"previous_hash":null}`, h)
		if prev != nil {
			links = fmt.Sprintf(`,"entry_hash":%q,"previous_hash":%q}`, h, prev)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"entry":` + strings.TrimSuffix(e, "}") + links + extras[i] + `}`)
		prev = &h
	}
	b.WriteString("]}")
	return []byte(b.String())
}

func sha(b string) string {
	sum := sha256.Sum256([]byte(b))
	return hex.EncodeToString(sum[:])
}

func b64(b string) string { return base64.StdEncoding.EncodeToString([]byte(b)) }

// TestBundlePayloads: every payload a step carries is held against its
// entry's commitment; an erased one is a notice with its record; one gone
// without a record is payload_missing; entries with their source inline
// are one source_inline notice.
func TestBundlePayloads(t *testing.T) {
	src := []string{`{"n":1,"user":"alice"}`, `{"n":2}`, `{"n":3}`, `{"n":4}`}
	params := `{"payload":{"tool":"ls"},"request_id":"r-5"}`
	rh, err := acs.RequestHash([]byte(params))
	if err != nil {
		t.Fatal(err)
	}
	ingested := func(i int, s string) string {
		return fmt.Sprintf(`{"entry_id":"e-%d","step_id":"s-%d","step_type":"ingest/test","source_format":"opa","source_key":"d-%d","source_sha256":%q}`, i, i, i, sha(s))
	}
	step := func(i int) string {
		return fmt.Sprintf(`{"entry_id":"e-%d","step_id":"s-%d","step_type":"ingest/acs","request_hash":%q}`, i, i, rh)
	}
	erasure := `{"payload":"%s","erased_at":"2026-12-01T10:00:00Z","reason":"retention period over","erased_by":"sweeper"}`
	entries := []string{
		`{"entry_id":"e-0","step_id":"s-0","step_type":"ingest/test","source_format":"opa","source_record":"{}"}`,
		ingested(1, src[0]), ingested(2, src[1]), ingested(3, src[2]), ingested(4, src[3]),
		step(5), step(6), step(7), step(8),
	}
	extras := []string{
		``,
		`,"source":"` + b64(src[0]) + `"`,
		`,"erased":[` + fmt.Sprintf(erasure, "source") + `]`,
		``,
		`,"source":"` + b64(`{"n":5}`) + `"`,
		`,"params":"` + b64(params) + `"`,
		`,"missing":["params"]`,
		`,"erased":[` + fmt.Sprintf(erasure, "params") + `]`,
		`,"params":"` + b64(`{"payload":{"tool":"rm"},"request_id":"r-5"}`) + `"`,
	}
	b := payloadBundle(t, entries, extras)
	rep, err := verify.VerifyBundle(bytes.NewReader(b), nil)
	if err != nil {
		t.Fatal(err)
	}
	type at struct {
		code string
		i    int
	}
	var got []at
	for _, f := range rep.Findings {
		if f.Code != verify.CodeNotAnchored {
			got = append(got, at{f.Code, f.EntryIndex})
		}
	}
	want := []at{{verify.CodePayloadMissing, 3}, {verify.CodePayloadMismatch, 4}, {verify.CodePayloadMissing, 6}, {verify.CodePayloadMismatch, 8}}
	if !slices.Equal(got, want) {
		t.Fatalf("findings %v, want %v", got, want)
	}
	if f := rep.Findings[1]; f.Expected != sha(src[3]) || f.Actual != sha(`{"n":5}`) {
		t.Errorf("payload_mismatch of a source: expected %s actual %s", f.Expected, f.Actual)
	}
	got = nil
	for _, n := range rep.Notices {
		got = append(got, at{n.Code, n.EntryIndex})
	}
	want = []at{{verify.CodePayloadErased, 2}, {verify.CodePayloadErased, 7}, {verify.CodeSourceInline, 0}}
	if !slices.Equal(got, want) {
		t.Fatalf("notices %v, want %v", got, want)
	}
	er := rep.Notices[0].Erasure
	if er == nil || er.Payload != "source" || er.Reason != "retention period over" || er.ErasedBy != "sweeper" || er.ErasedAt.Format("2006-01-02T15:04:05Z") != "2026-12-01T10:00:00Z" {
		t.Fatalf("erasure %+v", er)
	}
	js, _ := json.Marshal(rep.JSON())
	if !bytes.Contains(js, []byte(`"erasure":{"payload":"source","erased_at":"2026-12-01T10:00:00Z","reason":"retention period over","erased_by":"sweeper"}`)) {
		t.Errorf("the JSON report does not carry the erasure record: %s", js)
	}

	// The bundle is one the schema accepts.
	sch := compileSchema(t)
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("schema: %v", err)
	}

	// Malformed payload members are input errors naming the member.
	for _, c := range []struct{ extra, want string }{
		{`,"sauce":"x"`, `unknown field "sauce"`},
		{`,"source":"` + b64(src[0]) + `","source":"` + b64(src[0]) + `"`, `duplicate member "source"`},
		{`,"source":"not base64!"`, "source: not a base64 string"},
		{`,"erased":[{"payload":"entry","erased_at":"2026-12-01T10:00:00Z","reason":"r","erased_by":""}]`, `payload "entry"`},
		{`,"erased":[{"payload":"source","erased_at":"2026-12-01T10:00:00Z","reason":"r","erased_by":"","extra":1}]`, "erased:"},
		{`,"missing":["entry"]`, `missing[0]: "entry"`},
	} {
		bad := payloadBundle(t, entries[1:2], []string{c.extra})
		_, err := verify.VerifyBundle(bytes.NewReader(bad), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "steps") {
			t.Errorf("%s: %v, want an input error saying %q", c.extra, err, c.want)
		}
	}
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(verify.ReadTestFile(t, "..", "docs", "evidence-bundle.schema.json")))
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
		t.Fatal(err)
	}
	return s
}
