package acs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

type entryVector struct {
	Chain        int     `json:"chain"`
	Index        int     `json:"index"`
	Entry        string  `json:"entry"`
	Content      string  `json:"content"`
	EntryHash    string  `json:"entry_hash"`
	PreviousHash *string `json:"previous_hash"`
}

func loadEntryVectors(t testing.TB) []entryVector {
	t.Helper()
	raw, err := os.ReadFile("testdata/entry_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs []entryVector
	if err := json.Unmarshal(raw, &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs) < 50 {
		t.Fatalf("only %d entry vectors", len(vs))
	}
	return vs
}

// TestEntryVectors replays the chains of testdata/entry_vectors.json (made
// by testdata/gen_vectors.go with gowebpki/jcs and crypto/sha256 as the
// oracle): content bytes, the links copied out, and each entry_hash chained
// from the previous entry's recomputed hash.
func TestEntryVectors(t *testing.T) {
	t.Parallel()
	var prev *Hash
	for _, v := range loadEntryVectors(t) {
		t.Run(fmt.Sprintf("chain%d/entry%d", v.Chain, v.Index), func(t *testing.T) {
			if v.Index == 0 {
				prev = nil
			}
			e, err := ParseEntry([]byte(v.Entry))
			if err != nil {
				t.Fatalf("ParseEntry: %v", err)
			}
			if string(e.Content) != v.Content {
				t.Fatalf("Content:\n got %s\nwant %s", e.Content, v.Content)
			}
			if (e.PreviousHash == nil) != (v.PreviousHash == nil) || e.PreviousHash != nil && e.PreviousHash.String() != *v.PreviousHash {
				t.Errorf("PreviousHash = %v, want %v", e.PreviousHash, v.PreviousHash)
			}
			if e.EntryHash != nil && e.EntryHash.String() != v.EntryHash {
				t.Errorf("EntryHash member = %v, want %s", e.EntryHash, v.EntryHash)
			}
			if want := fmt.Sprintf("e-%d-%d", v.Chain, v.Index); e.EntryID != want {
				t.Errorf("EntryID = %q, want %q", e.EntryID, want)
			}
			h := EntryHash(e.Content, prev)
			if h.String() != v.EntryHash {
				t.Errorf("EntryHash = %s, want %s", h, v.EntryHash)
			}
			prev = &h

			// The same content through Canonicalize, and round trip.
			c, err := Canonicalize([]byte(v.Content))
			if err != nil || string(c) != v.Content {
				t.Errorf("Canonicalize(content) = %s, %v; want it unchanged", c, err)
			}
		})
	}
}

func TestParseEntry(t *testing.T) {
	t.Parallel()
	in := `{
		"timestamp": "2026-11-30T05:00:00Z",
		"step_type": "steps/toolCallRequest",
		"entry_id": "e\u002d1",
		"step_id": "req\n1",
		"previous_hash": "` + strings.Repeat("ab", 32) + `",
		"entry_hash": null,
		"request_hash": "` + strings.Repeat("0f", 32) + `",
		"z": {"entry_hash": "nested stays", "previous_hash": null},
		"a": [1.0, -0, 1e21]
	}`
	e, err := ParseEntry([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":[1,0,1e+21],"entry_id":"e-1","request_hash":"` + strings.Repeat("0f", 32) +
		`","step_id":"req\n1","step_type":"steps/toolCallRequest","timestamp":"2026-11-30T05:00:00Z",` +
		`"z":{"entry_hash":"nested stays","previous_hash":null}}`
	if string(e.Content) != want {
		t.Errorf("Content:\n got %s\nwant %s", e.Content, want)
	}
	if e.EntryID != "e-1" || e.StepID != "req\n1" || e.StepType != "steps/toolCallRequest" || e.Timestamp != "2026-11-30T05:00:00Z" {
		t.Errorf("members: %q %q %q %q", e.EntryID, e.StepID, e.StepType, e.Timestamp)
	}
	if e.EntryHash != nil {
		t.Errorf("EntryHash = %v, want nil for null", e.EntryHash)
	}
	if e.PreviousHash == nil || e.PreviousHash.String() != strings.Repeat("ab", 32) {
		t.Errorf("PreviousHash = %v", e.PreviousHash)
	}

	// Absent and null links are both "no hash", and both leave the content
	// the same; absent and null for other members differ.
	a, err := ParseEntry([]byte(`{"entry_id":"x","step_id":"y","step_type":"z"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseEntry([]byte(`{"previous_hash":null,"entry_id":"x","step_id":"y","step_type":"z","entry_hash":null}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Content) != string(b.Content) || a.Timestamp != "" || a.PreviousHash != nil || b.PreviousHash != nil {
		t.Errorf("absent vs null links: %s vs %s", a.Content, b.Content)
	}
	// entry_hash "" is what writers send before hashing: no hash, as null.
	d, err := ParseEntry([]byte(`{"previous_hash":null,"entry_id":"x","step_id":"y","step_type":"z","entry_hash":""}`))
	if err != nil {
		t.Fatalf(`entry_hash "": %v`, err)
	}
	if string(d.Content) != string(a.Content) || d.EntryHash != nil || d.PreviousHash != nil {
		t.Errorf(`entry_hash "": content %s, entry_hash %v`, d.Content, d.EntryHash)
	}
	c, err := ParseEntry([]byte(`{"entry_id":"x","step_id":"y","step_type":"z","provenance_summary":null}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(c.Content) == string(a.Content) {
		t.Errorf("a null member must stay in the content: %s", c.Content)
	}

	// ParseEntry's content is Canonicalize's output minus the two links.
	raw, _ := os.ReadFile("testdata/bench_entry.json")
	e, err = ParseEntry(raw)
	if err != nil {
		t.Fatal(err)
	}
	full, err := Canonicalize(raw)
	if err != nil {
		t.Fatal(err)
	}
	cut := full
	for _, m := range []string{`"entry_hash":"` + e.EntryHash.String() + `",`, `"previous_hash":"` + e.PreviousHash.String() + `",`} {
		cut = bytes.Replace(cut, []byte(m), nil, 1)
	}
	if string(cut) != string(e.Content) {
		t.Errorf("bench entry:\nParseEntry %s\nCanonicalize minus links %s", e.Content, cut)
	}
}

func TestParseEntryRefusals(t *testing.T) {
	t.Parallel()
	ok := `"entry_id":"e","step_id":"s","step_type":"t"`
	hash := strings.Repeat("a", 64)
	for _, tc := range []struct {
		name, in, text string
		kind           error // a JSONError class, or nil
	}{
		{"array", `[1]`, "context entry must be a JSON object, got array", nil},
		{"string", ` "x"`, "context entry must be a JSON object, got string", nil},
		{"number", `-1`, "context entry must be a JSON object, got number", nil},
		{"null", `null`, "context entry must be a JSON object, got null", nil},
		{"boolean", `true`, "context entry must be a JSON object, got boolean", nil},
		{"empty", ``, "context entry: unexpected end of input, expected a value at byte 0", ErrMalformed},
		{"missing entry_id", `{"step_id":"s","step_type":"t"}`, `context entry: missing required member "entry_id"`, nil},
		{"missing step_id", `{"entry_id":"e","step_type":"t"}`, `missing required member "step_id"`, nil},
		{"missing step_type", `{"entry_id":"e","step_id":"s"}`, `missing required member "step_type"`, nil},
		{"entry_id number", `{"entry_id":1,"step_id":"s","step_type":"t"}`, `member "entry_id" at byte 1 must be a string, got number`, nil},
		{"step_id null", `{"entry_id":"e","step_id":null,"step_type":"t"}`, `member "step_id" at byte 16 must be a string, got null`, nil},
		{"step_type object", `{"entry_id":"e","step_id":"s","step_type":{}}`, `member "step_type" at byte 30 must be a string, got object`, nil},
		{"timestamp number", `{` + ok + `,"timestamp":5}`, `member "timestamp" at byte 46 must be a string, got number`, nil},
		{"entry_hash number", `{` + ok + `,"entry_hash":5}`, `member "entry_hash" at byte 46 must be a string or null, got number`, nil},
		{"previous_hash array", `{` + ok + `,"previous_hash":[]}`, `member "previous_hash" at byte 46 must be a string or null, got array`, nil},
		{"previous_hash empty", `{` + ok + `,"previous_hash":""}`, `member "previous_hash" at byte 46: hash "": want 64 lowercase hex characters, got 0`, nil},
		{"previous_hash short", `{` + ok + `,"previous_hash":"abc"}`, `member "previous_hash" at byte 46: hash "abc": want 64 lowercase hex characters, got 3`, nil},
		{"entry_hash uppercase", `{` + ok + `,"entry_hash":"` + strings.ToUpper(hash) + `"}`, `member "entry_hash" at byte 46: hash "AAAA`, nil},
		{"request_hash null", `{` + ok + `,"request_hash":null}`, `member "request_hash" at byte 46 must be a string, got null`, nil},
		{"request_hash bad", `{` + ok + `,"request_hash":"` + hash[1:] + `g"}`, `member "request_hash" at byte 46: hash`, nil},
		{"duplicate entry_hash", `{` + ok + `,"entry_hash":"` + hash + `","entry_hash":null}`, `context entry: duplicate member "entry_hash" at byte 126`, ErrDuplicateMember},
		{"duplicate required", `{` + ok + `,"entry_id":"f"}`, `context entry: duplicate member "entry_id" at byte 46`, ErrDuplicateMember},
		{"trailing data", `{` + ok + `} x`, "context entry: unexpected character 'x' after the JSON value at byte 47", ErrTrailingData},
		{"lone surrogate", `{` + ok + `,"x":"\udead"}`, `context entry: low surrogate \udead without a high surrogate before it at byte 51`, ErrLoneSurrogate},
		{"number range", `{` + ok + `,"x":1e999}`, `context entry: number "1e999" is outside the IEEE 754 double range at byte 50`, ErrNumberRange},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := ParseEntry([]byte(tc.in))
			if err == nil {
				t.Fatalf("ParseEntry(%s) = %+v, want an error", tc.in, e)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("error %q does not contain %q", err, tc.text)
			}
			if tc.kind != nil && !errors.Is(err, tc.kind) {
				t.Errorf("error %q is not %v", err, tc.kind)
			}
		})
	}
}

func TestRequestHash(t *testing.T) {
	t.Parallel()
	// The signature member is part of the hashed params (DESIGN.md).
	params := ` {"signature": {"alg": "hmac-sha256", "value": "c2ln"}, "b": 2, "a": 1.0} `
	h, err := RequestHash([]byte(params))
	if err != nil {
		t.Fatal(err)
	}
	want := EntryHash([]byte(`{"a":1,"b":2,"signature":{"alg":"hmac-sha256","value":"c2ln"}}`), nil)
	if h != want {
		t.Errorf("RequestHash = %s, want %s", h, want)
	}
	unsigned, _ := RequestHash([]byte(`{"b":2,"a":1}`))
	if unsigned == h {
		t.Error("RequestHash ignored the signature member")
	}
	for _, tc := range []struct{ in, text string }{
		{`[]`, "request params must be a JSON object, got array"},
		{`"x"`, "request params must be a JSON object, got string"},
		{`{"a":1,"a":1}`, `request params: duplicate member "a" at byte 7`},
		{`{"a":1`, "request params: unexpected end of input in object opened at byte 0 at byte 6"},
	} {
		if _, err := RequestHash([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("RequestHash(%s) error = %v, want %q", tc.in, err, tc.text)
		}
	}
}

// TestPoolIsolation checks that reusing pooled buffers never leaks one
// call's bytes into another's result.
func TestPoolIsolation(t *testing.T) {
	t.Parallel()
	vs := loadEntryVectors(t)
	var got [][]byte
	for _, v := range vs {
		e, err := ParseEntry([]byte(v.Entry))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e.Content)
	}
	for i, v := range vs {
		if string(got[i]) != v.Content {
			t.Fatalf("vector %d changed after later calls", i)
		}
	}
}

// TestEntryMangling changes every byte of a ContextEntry in several ways.
// Each changed entry must be refused, or canonicalize to the same entry
// (an insignificant change such as whitespace or escape spelling), or get
// a different entry_hash, unless only its submitted entry_hash changed,
// which the chain recomputes and never trusts.
func TestEntryMangling(t *testing.T) {
	t.Parallel()
	orig := benchEntry(t)
	e0, err := ParseEntry(orig)
	if err != nil {
		t.Fatal(err)
	}
	full0, _ := Canonicalize(orig)
	h0 := EntryHash(e0.Content, e0.PreviousHash)

	refused, same, changed := 0, 0, 0
	m := make([]byte, len(orig))
	for i := range orig {
		for _, repl := range []byte{orig[i] ^ 0x01, orig[i] ^ 0x20, ' ', '"', '\\', '0', 'e', '}', 0x80} {
			if repl == orig[i] {
				continue
			}
			copy(m, orig)
			m[i] = repl
			e, err := ParseEntry(m)
			if err != nil {
				refused++
				continue
			}
			full, err := Canonicalize(m)
			if err != nil {
				t.Fatalf("byte %d = %q: ParseEntry accepts what Canonicalize refuses: %v", i, repl, err)
			}
			h := EntryHash(e.Content, e.PreviousHash)
			switch {
			case bytes.Equal(full, full0):
				if h != h0 {
					t.Fatalf("byte %d = %q: same canonical entry, different hash", i, repl)
				}
				same++
			case h == h0:
				if e.EntryHash != nil && *e.EntryHash != *e0.EntryHash && bytes.Equal(e.Content, e0.Content) {
					changed++
					continue
				}
				t.Fatalf("byte %d = %q: entry changed to %s but its hash did not", i, repl, full)
			default:
				changed++
			}
		}
	}
	t.Logf("%d refused, %d insignificant, %d changed the hash", refused, same, changed)
	if refused == 0 || changed == 0 {
		t.Errorf("mangling exercised too little: %d refused, %d changed", refused, changed)
	}
}
