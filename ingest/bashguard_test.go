package ingest

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBashGuardSeedVersion: a decision is read as the seed's
// decision-output.v1 (spec/seeds), whose Reason requires rule_id and
// message, in every form it takes; the entry names the form it matched.
func TestBashGuardSeedVersion(t *testing.T) {
	// decision is a deny with one reason and extra top-level members.
	decision := func(source, reason, extra string) []byte {
		return []byte(`{"schema_version":"1.0","decision":"deny","action":"block","source":"` + source + `",` +
			`"reasons":[` + reason + `],"input":{"raw":"git stash pop"},` +
			`"metadata":{"engine":"opa","rulebook_digest":"dee3746bf7b5"},` + extra +
			`"evaluated_at":"2026-07-01T14:23:45.123Z","decision_id":"7f3a9c2e-1b4d-4e8f-9a2c-5d6e7f8a9b01"}`)
	}
	const (
		full      = `{"rule_id":"r","message":"m","family":"git"}`
		unlocked  = `{"rule_id":"r","message":"m","bypassed":true,"unlock_key_id":"0a1b2c3d"}`
		noMessage = `{"rule_id":"r","bypassed":true,"unlock_key_id":"0a1b2c3d"}`
		noRule    = `{"message":"m","family":"git"}`
		signals   = `"signals":{"git.branch":"main"},`
	)
	for _, tc := range []struct {
		name   string
		record []byte
		schema string // "" quarantined as schema_invalid
		says   string // in the quarantine detail
	}{
		{"base form", decision("opa", full, ""), "decision-output.v1.base.json", ""},
		{"the seed's unlock keys", decision("opa-unlocked", unlocked, ""), "decision-output.v1.seed.json", ""},
		{"the later form's signals", decision("opa", full, signals), "decision-output.v1.unlock.json", ""},
		{"a reason without message", decision("opa-unlocked", noMessage, ""), "", "at /reasons/0: missing property 'message'"},
		{"a reason without rule_id", decision("opa", noRule, ""), "", "at /reasons/0: missing property 'rule_id'"},
		{"the later form, a reason without message", decision("opa", noMessage, signals), "", "seed's decision-output.v1 requires rule_id and message"},
		{"the later form, a reason without rule_id", decision("opa", noRule, signals), "", "at /reasons/0: missing property 'rule_id'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := BashGuardMapper{}.Map(t.Context(), Raw{File: "guard.jsonl", Record: 1, Bytes: tc.record})
			if tc.schema == "" {
				if rec.Quarantine == nil || rec.Quarantine.Reason != ReasonSchemaInvalid || !strings.Contains(rec.Quarantine.Detail, tc.says) {
					t.Fatalf("got %+v, want schema_invalid saying %q", rec.Quarantine, tc.says)
				}
				return
			}
			if rec.Quarantine != nil {
				t.Fatalf("quarantined: %+v", rec.Quarantine)
			}
			var e struct {
				SourceSchema string `json:"source_schema"`
			}
			if err := json.Unmarshal(rec.Entry.Entry, &e); err != nil || e.SourceSchema != tc.schema {
				t.Fatalf("source_schema %q, want %q (%v)", e.SourceSchema, tc.schema, err)
			}
		})
	}
}
