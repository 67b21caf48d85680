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
				if fnd, _ := eb.check(p, li+1); fnd == nil {
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
			case trace.OCSF:
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
