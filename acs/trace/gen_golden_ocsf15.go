//go:build ignore

// gen_golden_ocsf15 writes testdata/ocsf-1.5-golden.ndjson: the OCSF 1.5
// events of a fixed set of evidence, as acs/trace at commit a40c2a7 (the last
// whose default was OCSF 1.5) wrote them. TestOCSF15Golden holds the
// ocsf@1.5 encoding to these bytes. Run from acs/trace:
//
//	go run gen_golden_ocsf15.go
//
// It was run once, before OCSF 1.9 became the default; run again, it must
// write the same file (it encodes with the ocsf@1.5 format).
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"slices"
	"time"

	"github.com/acsledger/acsledger/acs/trace"
)

// golden15Format is the format the file was written with: trace.OCSF at
// commit a40c2a7, the ocsf@1.5 format since.
var golden15Format = trace.Format("ocsf@1.5")

const hash = "5d41402abc4b2a76b9719d911017c592aa5d41402abc4b2a76b9719d911017c5"

func guardianEntry(stepType, disposition string) []byte {
	return fmt.Appendf(nil, `{"entry_id":"e-1","step_id":"req-1","step_type":%q,"timestamp":"2026-11-30T05:12:44.318Z",`+
		`"request_hash":"9f2c1a7be3d04c5f8a6e2b1d7c3f9e0a4b5c6d7e8f90123456789abcdef01234","agent_id":"agent-7","turn_id":"t-1",`+
		`"decision":{"disposition":%q,"reasoning":"outside the intent","reason_codes":["ibac_capability_mismatch"],`+
		`"policy_references":[{"policy_id":"p","policy_version":"v1","rule_id":"r"}]},"metadata":{"approver_capable":false,"deferrals":0},`+
		`"provenance_summary":{"origins_seen":["user_input","tool_output"],"entry_count":3,"max_lineage_depth":2}}`, stepType, disposition)
}

var others = []string{
	`{"entry_id":"opa:1","step_id":"opa:1","step_type":"ingest/opa/decision","timestamp":"2026-11-30T05:12:44Z","decision":{"decision_id":"d-1","path":"authz/allow","result":true,"policy_versions":[{"policy_id":"authz","version":"7"}]},"source_format":"opa","source_record":"{}"}`,
	`{"entry_id":"bash-guard:1","step_id":"bash-guard:1","step_type":"ingest/bash-guard/decision","timestamp":"2026-11-30T05:12:44Z","decision":{"decision_id":"1","disposition":"deny","source":"rule","command":"rm -rf /","rule_ids":["no-rm"]},"flags":[],"source_format":"bash-guard","source_record":"{}"}`,
	`{"entry_id":"a2h:m:r","step_id":"a2h:m:r","step_type":"ingest/a2h/resolution","timestamp":"2026-11-30T05:12:44Z","resolution":{"resolution":"approve","agent_id":"agent-9"},"source_format":"a2h","source_record":"{}"}`,
	`{"entry_id":"e-3","step_id":"s-3","step_type":"intent_extension","timestamp":"2026-11-30T05:12:44Z","ask_step_id":"req-1","approver":{"type":"human","id":"alice"},"approval":{},"capabilities":["email.send"],"scope":"session"}`,
	`{"entry_id":"e","step_id":"s","step_type":"steps/toolCallRequest","decision":"deny","agent_id":7}`,
	"{\"entry_id\": \"e-9\",\n \"step_id\": \"s\\\"9\",\n \"step_type\": \"steps/userMessage\", \"timestamp\": \"not a time\"}",
}

// Case is one line of the file: the evidence and options encoded, and the
// events they gave.
type Case struct {
	Name     string         `json:"name"`
	Evidence trace.Evidence `json:"evidence"`
	// Entry, Response and Params are the evidence's bytes as strings, so
	// that the file keeps them exactly (a json.RawMessage is compacted).
	Entry    string        `json:"entry"`
	Response string        `json:"response,omitempty"`
	Params   string        `json:"params,omitempty"`
	Options  trace.Options `json:"options"`
	// Events are the events' exact bytes.
	Events []string `json:"events"`
}

func main() {
	var cases []Case
	li := uint64(41)
	steps := append(trace.StepTypes(), "protocols/MCP/tools/call", "steps/somethingNew")
	slices.Sort(steps)
	for _, s := range steps {
		for _, d := range []string{"allow", "deny", "modify", "ask", "defer"} {
			for _, agent := range []string{"", "agent-7"} {
				cases = append(cases, Case{Name: s + "/" + d + "/agent=" + agent, Evidence: trace.Evidence{
					Origin: "ledger.example/acs", SessionID: "sess-1", AgentID: agent, Position: 4,
					EntryHash: hash, LeafIndex: &li, Source: "guardian", Entry: guardianEntry(s, d)}})
			}
		}
	}
	for i, e := range others {
		ev := trace.Evidence{SessionID: "sess \"2\"", Position: int64(i), EntryHash: hash, Source: "ingest", Entry: json.RawMessage(e),
			Committed: time.Date(2026, 12, 1, 2, 3, 4, 5e6, time.UTC)}
		if i%2 == 0 {
			ev.LeafIndex, ev.Origin = &li, "ledger.example/acs"
		}
		cases = append(cases, Case{Name: fmt.Sprintf("other/%d", i), Evidence: ev})
	}
	params := json.RawMessage(`{"session_id":"s","payload":{"tool":{"name":"send_email"},"arguments":{"to":{"value":"bob@example.com"},"body":{"value":"SECRET"}}}}`)
	resp := json.RawMessage(`{"jsonrpc":"2.0","id":1,"result":{"decision":"deny","request_id":"req-1"}}`)
	for i, opt := range []trace.Options{{}, {AllowTools: true}, {AllowTools: true, AllowArgKeys: []string{"to"}}} {
		cases = append(cases, Case{Name: fmt.Sprintf("params/%d", i), Options: opt, Evidence: trace.Evidence{
			SessionID: "sess-3", Position: 1, EntryHash: hash, LeafIndex: &li, Entry: guardianEntry("steps/toolCallRequest", "deny"),
			Params: params, Response: resp}})
	}
	var out bytes.Buffer
	for _, c := range cases {
		evs, err := trace.EncodeAll(golden15Format, c.Evidence, c.Options)
		if err != nil {
			log.Fatalf("%s: %v", c.Name, err)
		}
		for _, e := range evs {
			c.Events = append(c.Events, string(e))
		}
		c.Entry, c.Response, c.Params = string(c.Evidence.Entry), string(c.Evidence.Response), string(c.Evidence.Params)
		c.Evidence.Entry, c.Evidence.Response, c.Evidence.Params = nil, nil, nil
		// Each event as a JSON string: the exact bytes, not a re-encoding.
		line, err := json.Marshal(c)
		if err != nil {
			log.Fatal(err)
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	if err := os.WriteFile("testdata/ocsf-1.5-golden.ndjson", out.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
