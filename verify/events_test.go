package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/acs/trace"
)

func eventsReport(t *testing.T, file string) *EventsReport {
	t.Helper()
	bundle := readTestFile(t, "testdata", "bundles", "valid.json")
	r, err := VerifyEvents([][]byte{bundle}, bytes.NewReader(readTestFile(t, "testdata", "events", file)), nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func findingCodes(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s@%d", f.Code, f.EntryIndex))
	}
	return out
}

// TestVerifyEvents checks the copies testdata/gen_events.go writes from
// bundles/valid.json.
func TestVerifyEvents(t *testing.T) {
	for _, tc := range []struct {
		file       string
		findings   []string
		statuses   map[string]int
		duplicates int
		notices    []string
	}{
		{file: "valid.ocsf.ndjson", statuses: map[string]int{"verified": 10}},
		{file: "valid.ocsf@1.5.ndjson", statuses: map[string]int{"verified": 10}},
		{file: "valid.cloudevents.ndjson", statuses: map[string]int{"verified": 9}},
		{file: "valid.acs.ndjson", statuses: map[string]int{"verified": 9}},
		{file: "pull.ndjson", statuses: map[string]int{"verified": 11}, duplicates: 1},
		{file: "missing.ndjson", statuses: map[string]int{"verified": 8},
			findings: []string{"event_missing@3", "event_missing@5"}},
		{file: "mismatch.ndjson", statuses: map[string]int{"verified": 8, "mismatch": 2},
			findings: []string{"event_mismatch@2", "event_mismatch@5", "event_missing@2", "event_missing@5"}},
		{file: "other_session.ndjson", statuses: map[string]int{"verified": 9, "outside_bundle": 1},
			notices: []string{"event_outside_bundle@-1"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			r := eventsReport(t, tc.file)
			got := findingCodes(r.Findings)
			slices.Sort(got)
			if !slices.Equal(got, tc.findings) {
				t.Errorf("findings %v, want %v", got, tc.findings)
			}
			if n := findingCodes(r.Notices); !slices.Equal(n, tc.notices) {
				t.Errorf("notices %v, want %v", n, tc.notices)
			}
			st := map[string]int{}
			for _, e := range r.Events {
				st[e.Status]++
			}
			if fmt.Sprint(st) != fmt.Sprint(tc.statuses) {
				t.Errorf("statuses %v, want %v", st, tc.statuses)
			}
			if r.Duplicates != tc.duplicates {
				t.Errorf("%d duplicates, want %d", r.Duplicates, tc.duplicates)
			}
			if r.Verified() != (len(tc.findings) == 0) {
				t.Errorf("Verified() = %v", r.Verified())
			}
		})
	}
	r := eventsReport(t, "mismatch.ndjson")
	for _, e := range r.Events {
		if e.Status != "mismatch" {
			continue
		}
		want := map[int64]string{2: "entry_hash", 5: "severity"}[e.Position]
		if e.Member != want {
			t.Errorf("line %d (position %d): member %q, want %q", e.Line, e.Position, e.Member, want)
		}
	}
}

// TestEventsBadInput: a line that is no event is an InputError naming the
// line.
func TestEventsBadInput(t *testing.T) {
	bundle := readTestFile(t, "testdata", "bundles", "valid.json")
	good := strings.SplitN(string(readTestFile(t, "testdata", "events", "valid.ocsf.ndjson")), "\n", 2)[0]
	for name, in := range map[string]string{
		"not JSON":                good + "\n{oops\n",
		"no handle":               good + "\n" + `{"class_uid":1007}` + "\n",
		"not an event":            good + "\n" + `{"hello":"world"}` + "\n",
		"bad cursor":              good + "\n" + `{"cursor":3,"event":` + good + "}\n",
		"trailing data":           good + "\n" + good + " {}\n",
		"wrong version":           good + "\n" + `{"specversion":"0.3","id":"x"}` + "\n",
		"bad position":            good + "\n" + strings.Replace(good, `"position":0`, `"position":-1`, 1) + "\n",
		"heartbeat with an event": good + "\n" + `{"heartbeat":"t","event":{}}` + "\n",
	} {
		_, err := VerifyEvents([][]byte{bundle}, strings.NewReader(in), nil)
		var ie *InputError
		if !errors.As(err, &ie) || ie.Line != 2 {
			t.Errorf("%s: error %v, want an InputError at line 2", name, err)
		}
	}
}

// TestEventsMangled changes each scalar member of each valid event, one
// at a time, and requires the check to notice: every member an event
// holds is either the ledger's (and compared) or made from params (and
// left out). Changes that break the evidence handle are input errors or
// mismatches; none may pass.
func TestEventsMangled(t *testing.T) {
	bundle := readTestFile(t, "testdata", "bundles", "valid.json")
	eb, err := readEventsBundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	eb.origin = "log.acsledger.example/audit"
	for _, f := range trace.Formats {
		lines := bytes.Split(bytes.TrimSpace(readTestFile(t, "testdata", "events", "valid."+string(f)+".ndjson")), []byte("\n"))
		n := 0
		for li, line := range lines {
			var doc any
			if err := json.Unmarshal(line, &doc); err != nil {
				t.Fatal(err)
			}
			for _, mangled := range mangles(doc) {
				p, err := trace.Parse(mangled)
				if err != nil || p.Handle.SessionID != eb.session {
					// A broken handle is an input error; another session
					// is outside the bundle, and this entry then missing.
					continue
				}
				unchecked := eb.unchecked
				if fnd, _ := eb.check(p, li+1); fnd == nil && eb.unchecked == unchecked {
					// (A checkpoint size the bundle lacks is noticed:
					// event_checkpoint_unchecked.)
					t.Errorf("%s line %d: mangled event accepted: %s", f, li+1, mangled)
				}
				n++
			}
		}
		if n < 50 {
			t.Errorf("%s: only %d mangled events checked", f, n)
		}
	}
}

// mangles returns copies of doc with one scalar changed each.
func mangles(doc any) [][]byte {
	var out [][]byte
	var walk func(v any, set func(any))
	walk = func(v any, set func(any)) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				walk(c, func(n any) { x[k] = n })
			}
		case []any:
			for i, c := range x {
				walk(c, func(n any) { x[i] = n })
			}
		default:
			var changed any
			switch y := x.(type) {
			case string:
				changed = y + "x"
			case float64:
				changed = y + 1
			case bool:
				changed = !y
			default:
				changed = "null"
			}
			set(changed)
			b, _ := json.Marshal(doc)
			out = append(out, b)
			set(x)
		}
	}
	walk(doc, func(any) {})
	return out
}

// TestEventsWithoutLinks: the export gives an entry's content, without its
// entry_hash and previous_hash members (the store keeps them apart); such
// a copy matches, and a link it does carry must be the ledger's.
func TestEventsWithoutLinks(t *testing.T) {
	bundle := readTestFile(t, "testdata", "bundles", "valid.json")
	for _, f := range trace.Formats {
		lines := strings.Split(strings.TrimSpace(string(readTestFile(t, "testdata", "events", "valid."+string(f)+".ndjson"))), "\n")
		var bare, wrong []string
		for i, l := range lines {
			var doc map[string]any
			if err := json.Unmarshal([]byte(l), &doc); err != nil {
				t.Fatal(err)
			}
			var entry map[string]any
			switch f {
			case trace.OCSF, trace.OCSF15:
				entry, _ = doc["unmapped"].(map[string]any)["acs"].(map[string]any)["entry"].(map[string]any)
			case trace.CloudEvents:
				entry = doc["data"].(map[string]any)["entry"].(map[string]any)
			case trace.ACS:
				entry = doc["entry"].(map[string]any)
			}
			if entry == nil {
				bare, wrong = append(bare, l), append(wrong, l) // a Detection Finding holds no entry
				continue
			}
			delete(entry, "entry_hash")
			delete(entry, "previous_hash")
			b, _ := json.Marshal(doc)
			bare = append(bare, string(b))
			if i == 3 {
				entry["previous_hash"] = strings.Repeat("1", 64)
				b, _ = json.Marshal(doc)
			}
			wrong = append(wrong, string(b))
		}
		r, err := VerifyEvents([][]byte{bundle}, strings.NewReader(strings.Join(bare, "\n")), nil)
		if err != nil || !r.Verified() {
			t.Errorf("%s without links: %v %v", f, err, findingCodes(r.Findings))
		}
		r, err = VerifyEvents([][]byte{bundle}, strings.NewReader(strings.Join(wrong, "\n")), nil)
		if err != nil || r.Verified() || len(r.Findings) == 0 || r.Findings[0].Code != CodeEventMismatch || !strings.Contains(r.Findings[0].Message, "previous_hash") {
			t.Errorf("%s with a wrong previous_hash: %v %+v", f, err, r.Findings)
		}
	}
}

// TestEventsIntegrity changes the record_integrity members of the valid
// OCSF 1.9 copy one way each and requires event_integrity_mismatch at the
// member changed; a checkpoint of a size the bundle does not hold is a
// notice, its root unchecked, and the copy still verifies.
func TestEventsIntegrity(t *testing.T) {
	bundle := readTestFile(t, "testdata", "bundles", "valid.json")
	lines := strings.Split(strings.TrimSpace(string(readTestFile(t, "testdata", "events", "valid.ocsf.ndjson"))), "\n")
	// The event of an anchored entry, so that every member is checked.
	li := -1
	for i, l := range lines {
		if strings.Contains(l, `"leaf_index":`) && strings.Contains(l, `"checkpoint":`) {
			li = i
			break
		}
	}
	if li < 0 {
		t.Fatal("no anchored OCSF 1.9 event with a checkpoint in valid.ocsf.ndjson")
	}
	att := func(m map[string]any) map[string]any { return m["attestation_list"].([]any)[0].(map[string]any) }
	handle := func(m map[string]any) map[string]any {
		return m["unmapped"].(map[string]any)["acsledger"].(map[string]any)
	}
	cp := func(m map[string]any) map[string]any { return handle(m)["checkpoint"].(map[string]any) }
	for _, tc := range []struct {
		name, member string
		mangle       func(m map[string]any)
	}{
		{"no attestation", "attestation_list", func(m map[string]any) { delete(m, "attestation_list") }},
		{"attestation not an array", "attestation_list", func(m map[string]any) { m["attestation_list"] = map[string]any{} }},
		{"two attestations", "attestation_list", func(m map[string]any) {
			m["attestation_list"] = append(m["attestation_list"].([]any), att(m))
		}},
		{"profile not named", "metadata.profiles", func(m map[string]any) { m["metadata"].(map[string]any)["profiles"] = []any{} }},
		{"fingerprint of another entry", "attestation_list[0].fingerprint.value", func(m map[string]any) {
			att(m)["fingerprint"].(map[string]any)["value"] = strings.Repeat("0", 64)
		}},
		{"fingerprint algorithm", "attestation_list[0].fingerprint.algorithm_id", func(m map[string]any) {
			att(m)["fingerprint"].(map[string]any)["algorithm_id"] = 4
		}},
		{"chain of another session", "attestation_list[0].chain_uid", func(m map[string]any) { att(m)["chain_uid"] = "sess-x" }},
		{"attestation uid another leaf", "attestation_list[0].uid", func(m map[string]any) { att(m)["uid"] = "99999" }},
		{"attestation uid dropped", "attestation_list[0].uid", func(m map[string]any) { delete(att(m), "uid") }},
		{"handle leaf another leaf", "unmapped.acsledger.leaf_index", func(m map[string]any) {
			handle(m)["leaf_index"] = json.Number("99999")
		}},
		{"receipt of another entry", "unmapped.acsledger.receipt", func(m map[string]any) {
			handle(m)["receipt"] = strings.Replace(handle(m)["receipt"].(string), "/entries/", "/entries/1", 1)
		}},
		{"receipt dropped", "unmapped.acsledger.receipt", func(m map[string]any) { delete(handle(m), "receipt") }},
		{"checkpoint root", "unmapped.acsledger.checkpoint.root_hash", func(m map[string]any) { cp(m)["root_hash"] = strings.Repeat("1", 64) }},
		{"checkpoint origin", "unmapped.acsledger.checkpoint.origin", func(m map[string]any) { cp(m)["origin"] = "other.example/log" }},
		{"checkpoint too small", "unmapped.acsledger.checkpoint.size", func(m map[string]any) { cp(m)["size"] = json.Number("0") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := json.NewDecoder(strings.NewReader(lines[li]))
			d.UseNumber()
			var m map[string]any
			if err := d.Decode(&m); err != nil {
				t.Fatal(err)
			}
			tc.mangle(m)
			b, _ := json.Marshal(m)
			copyLines := slices.Clone(lines)
			copyLines[li] = string(b)
			r, err := VerifyEvents([][]byte{bundle}, strings.NewReader(strings.Join(copyLines, "\n")), nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.Verified() || len(r.Findings) == 0 {
				t.Fatalf("verified: %+v", r.Findings)
			}
			f := r.Findings[0]
			if f.Code != CodeEventIntegrityMismatch || !strings.Contains(f.Message, " "+tc.member+":") || f.Where != fmt.Sprintf("event line %d", li+1) {
				t.Errorf("finding %+v, want %s at %s", f, CodeEventIntegrityMismatch, tc.member)
			}
		})
	}

	// A checkpoint the bundle does not hold, bigger than its own: the root
	// cannot be compared, a notice says so, and the copy verifies.
	var out []string
	for _, l := range lines {
		out = append(out, strings.Replace(l, `"checkpoint":{"origin":"log.acsledger.example/audit","size":`, `"checkpoint":{"origin":"log.acsledger.example/audit","size":1`, 1))
	}
	r, err := VerifyEvents([][]byte{bundle}, strings.NewReader(strings.Join(out, "\n")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Verified() || len(r.Notices) != 1 || r.Notices[0].Code != CodeEventCheckpointUnchecked || !strings.Contains(r.Notices[0].Message, "10 event(s)") {
		t.Errorf("a checkpoint the bundle lacks: verified %v, findings %+v, notices %+v", r.Verified(), r.Findings, r.Notices)
	}
}

// TestEventCodesDocumented: the events check's codes have rows in
// docs/findings.md.
func TestEventCodesDocumented(t *testing.T) {
	doc := string(readTestFile(t, "..", "docs", "findings.md"))
	for _, c := range []string{CodeEventMismatch, CodeEventMissing, CodeEventOutsideBundle, CodeEventIntegrityMismatch, CodeEventCheckpointUnchecked} {
		if !strings.Contains(doc, "| `"+c+"` |") && !strings.Contains(doc, "| `"+c+"` (notice) |") {
			t.Errorf("docs/findings.md has no row for %s", c)
		}
	}
}
