package trace

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

const testHash = "5d41402abc4b2a76b9719d911017c592aa5d41402abc4b2a76b9719d911017c5"

// guardianEntry is an entry as the Guardian writes it (guardian/step.go).
func guardianEntry(stepType, disposition string) []byte {
	return fmt.Appendf(nil, `{"entry_id":"e-1","step_id":"req-1","step_type":%q,"timestamp":"2026-11-30T05:12:44.318Z",`+
		`"request_hash":"9f2c1a7be3d04c5f8a6e2b1d7c3f9e0a4b5c6d7e8f90123456789abcdef01234","agent_id":"agent-7","turn_id":"t-1",`+
		`"decision":{"disposition":%q,"reasoning":"outside the intent","reason_codes":["ibac_capability_mismatch"],`+
		`"policy_references":[{"policy_id":"p","policy_version":"v1","rule_id":"r"}]},"metadata":{"approver_capable":false,"deferrals":0},`+
		`"provenance_summary":{"origins_seen":["user_input","tool_output"],"entry_count":3,"max_lineage_depth":2},`+
		`"entry_hash":%q,"previous_hash":null}`, stepType, disposition, testHash)
}

// ingestEntries are entries as ingest writes them (ingest/*.go), abridged.
var ingestEntries = map[string]string{
	"ingest/opa/decision": `{"entry_id":"opa:1","step_id":"opa:1","step_type":"ingest/opa/decision","timestamp":"2026-11-30T05:12:44Z",` +
		`"decision":{"decision_id":"d-1","path":"authz/allow","result":true,"policy_versions":[{"policy_id":"authz","version":"7"}]},"source_format":"opa","source_record":"{}"}`,
	"ingest/bash-guard/decision": `{"entry_id":"bash-guard:1","step_id":"bash-guard:1","step_type":"ingest/bash-guard/decision","timestamp":"2026-11-30T05:12:44Z",` +
		`"decision":{"decision_id":"1","disposition":"deny","source":"rule","command":"rm -rf /","rule_ids":["no-rm"]},"flags":[],"source_format":"bash-guard","source_record":"{}"}`,
	"ingest/bash-guard/audit": `{"entry_id":"bash-guard-audit:1","step_id":"bash-guard-audit:1","step_type":"ingest/bash-guard/audit","timestamp":"2026-11-30T05:12:44Z",` +
		`"decision":{"decision_id":"1","disposition":"allow","source":"rule","command":"ls","rule_ids":[]},"flags":[],"source_format":"bash-guard-audit","source_record":"{}"}`,
	"ingest/a2h/resolution": `{"entry_id":"a2h:m:r","step_id":"a2h:m:r","step_type":"ingest/a2h/resolution","timestamp":"2026-11-30T05:12:44Z",` +
		`"resolution":{"a2h_version":"0.3","in_reply_to":"m","resolution_id":"r","resolution":"approve","defaulted":false,"jti":"j","t":"1","key_id":"k","callback_url":"https://x","agent_id":"agent-9"},"source_format":"a2h","source_record":"{}"}`,
	"ask_resolution": `{"entry_id":"e-2","step_id":"s-2","step_type":"ask_resolution","timestamp":"2026-11-30T05:12:44Z","ask_step_id":"req-1",` +
		`"approver":{"type":"human","id":"alice"},"approval":{}}`,
	"intent_extension": `{"entry_id":"e-3","step_id":"s-3","step_type":"intent_extension","timestamp":"2026-11-30T05:12:44Z","ask_step_id":"req-1",` +
		`"approver":{"type":"human","id":"alice"},"approval":{},"capabilities":["email.send"],"scope":"session"}`,
}

// TestOCSFWalk walks every step type the mapping names, the ones acsledger
// adds, an MCP tool call and an unknown step type, with every decision and
// with and without a known agent, and checks each event against
// ocsf-mapping.json and the committed schema of its OCSF version: 1.9 with
// the record_integrity profile for ocsf, 1.5.0 for ocsf@1.5.
func TestOCSFWalk(t *testing.T) {
	for _, tc := range []struct {
		f       Format
		dir     string
		version string
	}{
		{OCSF, ocsf19Dir, "1.9.0"},
		{OCSF15, ocsf15Dir, "1.5.0"},
	} {
		t.Run(string(tc.f), func(t *testing.T) { walkOCSF(t, tc.f, tc.dir, tc.version) })
	}
}

func walkOCSF(t *testing.T, f Format, dir, version string) {
	schema := loadOCSF(t, dir)
	var mapping struct {
		Properties struct {
			StepToClass struct {
				Default map[string]struct {
					ClassUID   int  `json:"class_uid"`
					ActivityID *int `json:"activity_id"`
				} `json:"default"`
			} `json:"step_to_class"`
			Severity struct {
				Default map[string]int `json:"default"`
			} `json:"severity_mapping"`
		} `json:"properties"`
	}
	b, err := os.ReadFile("testdata/ocsf-mapping.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &mapping); err != nil {
		t.Fatal(err)
	}
	steps := StepTypes()
	for s := range mapping.Properties.StepToClass.Default {
		if !slices.Contains(steps, s) {
			t.Errorf("mapping step %s has no class of ours", s)
		}
	}
	steps = append(steps, "protocols/MCP/tools/call", "steps/somethingNew")
	slices.Sort(steps)

	classesUsed := map[int]bool{}
	li := uint64(41)
	for _, step := range steps {
		for _, d := range []string{"allow", "deny", "modify", "ask", "defer"} {
			for _, agent := range []string{"", "agent-7"} {
				name := fmt.Sprintf("%s/%s/agent=%q", step, d, agent)
				entry := guardianEntry(step, d)
				if raw, ok := ingestEntries[step]; ok {
					if d != "allow" {
						continue
					}
					entry = []byte(raw)
				}
				ev := Evidence{Origin: "ledger.example/acs", SessionID: "sess-1", AgentID: agent, Position: 4,
					EntryHash: testHash, LeafIndex: &li, Source: "guardian", Entry: entry}
				if agent != "" {
					// Half the walk with a covering checkpoint, half without.
					ev.Checkpoint = &Checkpoint{Origin: "ledger.example/acs", Size: 42, RootHash: strings.Repeat("ab", 32)}
				}
				evs, err := EncodeAll(f, ev, Options{})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				v, _ := view(&ev)
				disp := v.disposition()
				wantN := 1
				if disp != "" && disp != "allow" {
					wantN = 2
				}
				if len(evs) != wantN {
					t.Fatalf("%s: %d events, want %d", name, len(evs), wantN)
				}
				for i, e := range evs {
					for _, msg := range schema.check(t, e) {
						t.Errorf("%s event %d: %s", name, i, msg)
					}
					var got struct {
						Metadata struct {
							Version  string   `json:"version"`
							Profiles []string `json:"profiles"`
						} `json:"metadata"`
						Attestations []struct {
							UID          string `json:"uid"`
							AuthorityUID string `json:"authority_uid"`
							ChainUID     string `json:"chain_uid"`
							Fingerprint  struct {
								AlgorithmID int    `json:"algorithm_id"`
								Value       string `json:"value"`
							} `json:"fingerprint"`
						} `json:"attestation_list"`
						ClassUID   int `json:"class_uid"`
						ActivityID int `json:"activity_id"`
						SeverityID int `json:"severity_id"`
						Time       int64
						Actor      struct {
							User *struct {
								UID    string `json:"uid"`
								TypeID int    `json:"type_id"`
								Type   string `json:"type"`
							} `json:"user"`
						} `json:"actor"`
						Unmapped struct {
							ACS       map[string]json.RawMessage `json:"acs"`
							ACSLedger Handle                     `json:"acsledger"`
						} `json:"unmapped"`
					}
					if err := json.Unmarshal(e, &got); err != nil {
						t.Fatal(err)
					}
					classesUsed[got.ClassUID] = true
					if got.Metadata.Version != version {
						t.Errorf("%s event %d: metadata.version %q, want %q", name, i, got.Metadata.Version, version)
					}
					h := got.Unmapped.ACSLedger
					if f == OCSF15 {
						if got.Attestations != nil || h.Receipt != "" || h.Checkpoint != nil || slices.Contains(got.Metadata.Profiles, "record_integrity") {
							t.Errorf("%s event %d: an ocsf@1.5 event with 1.9's integrity members: %s", name, i, e)
						}
					} else {
						if !slices.Contains(got.Metadata.Profiles, "record_integrity") {
							t.Errorf("%s event %d: metadata.profiles %v lacks record_integrity", name, i, got.Metadata.Profiles)
						}
						if len(got.Attestations) != 1 {
							t.Fatalf("%s event %d: %d attestations, want 1: %s", name, i, len(got.Attestations), e)
						}
						a := got.Attestations[0]
						if a.UID != "41" || a.AuthorityUID != "ledger.example/acs" || a.ChainUID != "sess-1" ||
							a.Fingerprint.AlgorithmID != 3 || a.Fingerprint.Value != testHash {
							t.Errorf("%s event %d: attestation %+v", name, i, a)
						}
						if h.Receipt != "/api/v1/sessions/sess-1/entries/4/receipt" {
							t.Errorf("%s event %d: receipt %q", name, i, h.Receipt)
						}
						if (agent != "") != (h.Checkpoint != nil) || (h.Checkpoint != nil && *h.Checkpoint != *ev.Checkpoint) {
							t.Errorf("%s event %d: checkpoint %+v, want %+v", name, i, h.Checkpoint, ev.Checkpoint)
						}
					}
					if got.Time != 1796015564318 && got.Time != 1796015564000 {
						t.Errorf("%s event %d: time %d", name, i, got.Time)
					}
					wantSev := 1
					if disp != "" {
						wantSev = mapping.Properties.Severity.Default[disp]
					}
					if got.SeverityID != wantSev {
						t.Errorf("%s event %d: severity_id %d, want %d", name, i, got.SeverityID, wantSev)
					}
					if h.SessionID != "sess-1" || h.Position != 4 || h.EntryHash != testHash || h.LeafIndex == nil || *h.LeafIndex != 41 {
						t.Errorf("%s event %d: evidence handle %+v", name, i, h)
					}
					if u := got.Actor.User; u != nil && (u.TypeID != 99 || u.Type != "AI Agent") {
						t.Errorf("%s event %d: actor.user %+v, want type_id 99 AI Agent", name, i, u)
					}
					if agent != "" && (got.Actor.User == nil || got.Actor.User.UID != agent) {
						t.Errorf("%s event %d: actor.user %+v, want uid %s", name, i, got.Actor.User, agent)
					}
					if _, ingested := ingestEntries[step]; !ingested && !strings.Contains(string(e), `"enrichments":[{"name":"acs_provenance_origin","value":"user_input,tool_output","data":{"origins_seen"`) {
						t.Errorf("%s event %d: no acs_provenance_origin enrichment", name, i)
					}
					if i == 1 {
						if got.ClassUID != 2004 {
							t.Errorf("%s: second event class %d, want Detection Finding 2004", name, got.ClassUID)
						}
						continue
					}
					if m, ok := mapping.Properties.StepToClass.Default[step]; ok {
						if got.ClassUID != m.ClassUID {
							t.Errorf("%s: class %d, mapping says %d", name, got.ClassUID, m.ClassUID)
						}
						if m.ActivityID != nil && got.ActivityID != *m.ActivityID {
							t.Errorf("%s: activity %d, mapping says %d", name, got.ActivityID, *m.ActivityID)
						}
					}
					if string(got.Unmapped.ACS["entry"]) != string(entry) {
						t.Errorf("%s: unmapped.acs.entry is not the entry as stored", name)
					}
				}
			}
		}
	}
	for _, c := range []int{1005, 1007, 2004, 3002, 3003, 5001, 6002, 6003, 6005} {
		if !classesUsed[c] {
			t.Errorf("class %d never used by the walk", c)
		}
	}
}

// TestOCSFSchemaCatches makes sure the schema check is not vacuous: events
// broken in each way it looks for are refused, by the 1.9 schema with its
// record_integrity profile as by 1.5's.
func TestOCSFSchemaCatches(t *testing.T) {
	schema := loadOCSF(t, ocsf19Dir)
	li := uint64(7)
	ev := Evidence{SessionID: "s", AgentID: "a", Position: 0, EntryHash: testHash, LeafIndex: &li, Entry: guardianEntry("steps/toolCallRequest", "allow")}
	good, err := Encode(OCSF, ev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if errs := schema.check(t, good); len(errs) != 0 {
		t.Fatalf("good event refused: %v", errs)
	}
	for name, mangle := range map[string]func(m map[string]any){
		"no process":           func(m map[string]any) { delete(m, "process") },
		"no metadata.version":  func(m map[string]any) { delete(m["metadata"].(map[string]any), "version") },
		"unknown attribute":    func(m map[string]any) { m["acs_decision"] = "allow" },
		"process without uid":  func(m map[string]any) { delete(m["process"].(map[string]any), "uid") },
		"wrong type_uid":       func(m map[string]any) { m["type_uid"] = 100702 },
		"wrong class_name":     func(m map[string]any) { m["class_name"] = "Application Activity" },
		"activity not in enum": func(m map[string]any) { m["activity_id"] = 42; m["type_uid"] = 100742 },
		"device without type":  func(m map[string]any) { delete(m["device"].(map[string]any), "type_id") },
		"profile not named":    func(m map[string]any) { m["metadata"].(map[string]any)["profiles"] = []any{} },
		"unknown profile": func(m map[string]any) {
			m["metadata"].(map[string]any)["profiles"] = []any{"record_integrity", "tamper_proof"}
		},
		"attestation without fingerprint": func(m map[string]any) {
			delete(m["attestation_list"].([]any)[0].(map[string]any), "fingerprint")
		},
		"fingerprint without algorithm_id": func(m map[string]any) {
			delete(m["attestation_list"].([]any)[0].(map[string]any)["fingerprint"].(map[string]any), "algorithm_id")
		},
		"attestation with a leaf member": func(m map[string]any) {
			m["attestation_list"].([]any)[0].(map[string]any)["leaf_index"] = 7
		},
		"attestation not a list": func(m map[string]any) { m["attestation_list"] = "x" },
	} {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		mangle(m)
		b, _ := json.Marshal(m)
		if errs := schema.check(t, b); len(errs) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestParams: params never leave by default; allowed, only the tool name
// and the allowed argument values do, in every format.
func TestParams(t *testing.T) {
	params := []byte(`{"session_id":"s","payload":{"tool":{"name":"send_email"},"arguments":{` +
		`"to":{"value":"bob@example.com","provenance":{"origin":"param_origin_x"}},` +
		`"body":{"value":"SECRET-BODY","provenance":{"origin":"param_origin_x"}}}}}`)
	ev := Evidence{SessionID: "s", Position: 1, EntryHash: testHash, Entry: guardianEntry("steps/toolCallRequest", "deny"), Params: params}
	for _, f := range Formats {
		for _, tc := range []struct {
			opt       Options
			want      []string
			forbidden []string
		}{
			{Options{}, nil, []string{"send_email", "bob@example.com", "SECRET-BODY", `"params"`}},
			{Options{AllowTools: true}, []string{`"tool":"send_email"`}, []string{"bob@example.com", "SECRET-BODY", `"to"`}},
			{Options{AllowArgKeys: []string{"to", "cc"}}, []string{`"arguments":{"to":"bob@example.com"}`}, []string{"send_email", "SECRET-BODY", "param_origin_x"}},
		} {
			evs, err := EncodeAll(f, ev, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				for _, w := range tc.want {
					if !strings.Contains(string(e), w) {
						t.Errorf("%s %+v: %s lacks %s", f, tc.opt, e, w)
					}
				}
				for _, w := range tc.forbidden {
					if strings.Contains(string(e), w) {
						t.Errorf("%s %+v: %s has %s", f, tc.opt, e, w)
					}
				}
			}
		}
	}
}

// TestBareDecision: an entry whose decision is the bare disposition string,
// as other writers append it, is encoded with that disposition.
func TestBareDecision(t *testing.T) {
	entry := []byte(`{"entry_id":"e","step_id":"s","step_type":"steps/toolCallRequest","decision":"deny","agent_id":7}`)
	evs, err := EncodeAll(OCSF, Evidence{SessionID: "s", EntryHash: testHash, Entry: entry}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || !strings.Contains(string(evs[0]), `"severity_id":4,`) || !strings.Contains(string(evs[1]), `"class_uid":2004,`) {
		t.Fatalf("events %s", evs)
	}
	// A member of an unexpected type (agent_id a number) is not the agent.
	if strings.Contains(string(evs[0]), `"user"`) {
		t.Errorf("agent from a non-string agent_id: %s", evs[0])
	}
	for _, bad := range []string{``, `{`, `[]`, `{"step_id":"s"}`, `{"step_type":"x"} {}`} {
		if _, err := Encode(OCSF, Evidence{SessionID: "s", Position: 3, Entry: []byte(bad)}, Options{}); err == nil || !strings.Contains(err.Error(), "entry s/3") {
			t.Errorf("entry %q: error %v, want one naming entry s/3", bad, err)
		}
	}
}

// TestCloudEvent checks the CloudEvents 1.0 structured-mode event against
// the spec's required context attributes and acsledger's choices: id the
// entry hash, source the log origin, subject SESSION/POSITION, time the
// entry's timestamp, data the entry as stored with its decision.
func TestCloudEvent(t *testing.T) {
	entry := guardianEntry("steps/toolCallRequest", "deny")
	resp := []byte(`{"jsonrpc":"2.0","id":1,"result":{"decision":"deny"}}`)
	ev := Evidence{Origin: "ledger.example/acs", SessionID: "sess/1", Position: 12, EntryHash: testHash, Entry: entry, Response: resp}
	b, err := Encode(CloudEvents, ev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ce map[string]json.RawMessage
	if err := json.Unmarshal(b, &ce); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"specversion": `"1.0"`, "id": `"` + testHash + `"`, "source": `"ledger.example/acs"`,
		"type": `"` + CloudEventType + `"`, "subject": `"sess/1/12"`, "time": `"2026-11-30T05:12:44.318Z"`,
		"datacontenttype": `"application/json"`,
	}
	for k, v := range want {
		if string(ce[k]) != v {
			t.Errorf("%s = %s, want %s", k, ce[k], v)
		}
	}
	var data struct {
		ACSLedger Handle          `json:"acsledger"`
		Decision  string          `json:"decision"`
		Entry     json.RawMessage `json:"entry"`
		Response  json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(ce["data"], &data); err != nil {
		t.Fatal(err)
	}
	if data.Decision != "deny" || string(data.Entry) != string(entry) || string(data.Response) != string(resp) || data.ACSLedger.Position != 12 {
		t.Errorf("data %s", ce["data"])
	}
	for k := range ce {
		// CloudEvents 1.0: attribute names are lowercase letters and digits.
		for _, c := range k {
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
				t.Errorf("attribute name %q", k)
			}
		}
	}

	a, err := Encode(ACS, ev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantACS := `{"acsledger":{"session_id":"sess/1","position":12,"entry_hash":"` + testHash + `","origin":"ledger.example/acs"},"entry":` + string(entry) + `,"response":` + string(resp) + `}`
	if string(a) != wantACS {
		t.Errorf("acs event\n%s\nwant\n%s", a, wantACS)
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"": OCSF, "ocsf": OCSF, "ocsf@1.9": OCSF, "ocsf@1.5": OCSF15, "cloudevents": CloudEvents, "acs": ACS} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"OCSF", "json", "cef", "ocsf@1.6", "ocsf@"} {
		if _, err := ParseFormat(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseFormat(%q): %v", bad, err)
		}
	}
}
