package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/ingest"
	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/ledger/retention"
	"github.com/acsledger/acsledger/verify"
)

// The client of an OPA decision and the host of a bash-guard decision, as
// their sources write them.
const (
	clientAddr = "192.0.2.7:51544"
	clientHost = "alice-laptop.corp.example"
)

var (
	opaWithClient = `{"decision_id":"d-client","path":"authz/allow","input":{"session_id":"sess-client","user":"alice"},"result":true,` +
		`"labels":{"id":"opa-1"},"requested_by":"` + clientAddr + `","timestamp":"2026-12-01T10:00:00Z"}`
	bashGuardWithHost = `{"schema_version":"1.0","decision":"allow","action":"allow","source":"opa","reasons":[],"input":{"raw":"ls"},` +
		`"metadata":{"engine":"opa","rulebook_digest":"dee3746bf7b5","hostname":"` + clientHost + `","session_id":"sess-client"},` +
		`"evaluated_at":"2026-12-01T10:00:01.000Z","decision_id":"00000000-0000-4000-8000-0000000000c1"}`
)

// storedEntry returns the exact bytes the store holds for an entry.
func storedEntry(t *testing.T, s ledger.ChainReader, session string, position int64) []byte {
	t.Helper()
	es, err := s.Entries(context.Background(), session, position, 1)
	if err != nil || len(es) != 1 {
		t.Fatalf("entry %s/%d: %v", session, position, err)
	}
	return es[0].Content
}

// TestNoClientInEntry: a new OPA decision's entry holds no requested_by
// and a new bash-guard decision's no hostname: the stored entry bytes name
// neither the client's address nor its host, which only the sealed source
// record holds; the bundle verifies with no notice.
func TestNoClientInEntry(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			f := evidencetest.New(t, kind)
			if sum, got := run(t, f, ingest.OPAMapper{}, ingest.ArrayElements(strings.NewReader("["+opaWithClient+"]"), "upload.json")); sum.Accepted != 1 {
				t.Fatalf("opa: %+v %+v", sum, got)
			}
			if sum, got := run(t, f, ingest.BashGuardMapper{}, ingest.Lines(strings.NewReader(bashGuardWithHost), "guard.jsonl")); sum.Accepted != 1 {
				t.Fatalf("bash-guard: %+v %+v", sum, got)
			}
			for pos, client := range []string{clientAddr, clientHost} {
				entry := storedEntry(t, f.Store, "sess-client", int64(pos))
				for _, banned := range []string{client, `"requested_by"`, `"hostname"`, "192.0.2.7", "alice-laptop"} {
					if bytes.Contains(entry, []byte(banned)) {
						t.Fatalf("the stored entry at %d holds %s: %s", pos, banned, entry)
					}
				}
				if src, _ := sourceRecord(t, f.Store, "sess-client", int64(pos)); !strings.Contains(src, client) {
					t.Fatalf("the source record at %d does not hold %s: %s", pos, client, src)
				}
			}
			rep := exportVerify(t, f, "sess-client", f.Options(), f.Trust(t))
			if len(rep.Notices) != 0 {
				t.Fatalf("notices %+v", rep.Notices)
			}
		})
	}
}

// TestOldClientEntriesNoticed: entries ingested before the client's members
// were kept out of them (an OPA decision holding requested_by, a
// bash-guard decision holding hostname) still verify, and the bundle names
// them with one client_in_entry notice: the first one's index, the count,
// and the members in its message.
func TestOldClientEntriesNoticed(t *testing.T) {
	ctx := context.Background()
	old := func(t *testing.T, rec ledger.IngestRecord, member string, value any, path ...string) ledger.IngestRecord {
		t.Helper()
		if rec.Quarantine != nil {
			t.Fatalf("mapping: %+v", rec.Quarantine)
		}
		var e map[string]any
		if err := json.Unmarshal(rec.Entry.Entry, &e); err != nil {
			t.Fatal(err)
		}
		obj := e
		for _, p := range path {
			obj = obj[p].(map[string]any)
		}
		obj[member] = value
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		rec.Entry.Entry, rec.Entry.SessionID = b, "sess-old"
		return rec
	}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			f := evidencetest.New(t, kind)
			recs := []ledger.IngestRecord{
				// A new entry first: it is not counted.
				ingest.BashGuardMapper{}.Map(ctx, ingest.Raw{File: "g.jsonl", Record: 1, Bytes: []byte(strings.Replace(bashGuardWithHost, "0000000000c1", "0000000000c0", 1))}),
				old(t, ingest.OPAMapper{}.Map(ctx, ingest.Raw{File: "u.json", Record: 1, Bytes: []byte(opaWithClient)}), "requested_by", clientAddr, "decision"),
				old(t, ingest.BashGuardMapper{}.Map(ctx, ingest.Raw{File: "g.jsonl", Record: 2, Bytes: []byte(bashGuardWithHost)}), "hostname", clientHost),
			}
			recs[0].Entry.SessionID = "sess-old"
			res, err := f.Store.(ingest.Store).Ingest(ctx, recs)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if r.Status != ledger.IngestAccepted || r.Position != int64(i) {
					t.Fatalf("record %d: %+v", i, r)
				}
			}
			rep := exportVerify(t, f, "sess-old", f.Options(), f.Trust(t))
			if len(rep.Notices) != 1 {
				t.Fatalf("notices %+v, want one client_in_entry", rep.Notices)
			}
			n := rep.Notices[0]
			if n.Code != verify.CodeClientInEntry || n.EntryIndex != 1 || n.Actual != "2" ||
				!strings.Contains(n.Message, "decision.requested_by") || !strings.Contains(n.Message, "hostname") {
				t.Fatalf("notice %+v", n)
			}
		})
	}
}

// TestOPASubjectErased: with the subject mapped from input.user, each
// session's agent id is its user; `erase --agent alice` (an erasure
// request by subject) erases the source records of alice's decisions and
// no other, and her session's bundle still verifies, with one
// payload_erased notice per erased record and the same head.
func TestOPASubjectErased(t *testing.T) {
	events := `[
 {"decision_id":"s-1","path":"authz/allow","input":{"session_id":"sess-a","user":"alice"},"result":true,"labels":{"id":"opa-1"},"requested_by":"192.0.2.7:1","timestamp":"2026-12-01T10:00:00Z"},
 {"decision_id":"s-2","path":"authz/allow","input":{"session_id":"sess-b","user":"bob"},"result":true,"labels":{"id":"opa-1"},"requested_by":"192.0.2.8:1","timestamp":"2026-12-01T10:00:01Z"},
 {"decision_id":"s-3","path":"authz/allow","input":{"session_id":"sess-a","user":"alice"},"result":false,"labels":{"id":"opa-1"},"requested_by":"192.0.2.7:2","timestamp":"2026-12-01T10:00:02Z"}
]`
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			f := evidencetest.New(t, kind)
			m := ingest.OPAMapper{SubjectPath: "input.user"}
			if sum, got := run(t, f, m, ingest.ArrayElements(strings.NewReader(events), "upload.json")); sum.Accepted != 3 {
				t.Fatalf("summary %+v %+v", sum, got)
			}
			for session, agent := range map[string]string{"sess-a": "alice", "sess-b": "bob"} {
				s, err := f.Store.Session(ctx, session)
				if err != nil || s.AgentID != agent {
					t.Fatalf("session %s: agent %q, %v; want %q", session, s.AgentID, err, agent)
				}
			}
			f.Integrate(t)
			var before bytes.Buffer
			if _, err := evidence.Build(ctx, f.Store, f.Log, "sess-a", &before, f.Options()); err != nil {
				t.Fatal(err)
			}

			svc := retention.New(f.Store, retention.Options{})
			rep, err := svc.Erase(ctx, retention.Request{AgentPrefix: "alice", Until: time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano),
				Reason: "GDPR Art. 17 request #31", By: "dpo@example.org"})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Erased != 2 || len(rep.Sessions) != 1 || rep.Sessions[0].SessionID != "sess-a" {
				t.Fatalf("erasure report %+v, want alice's 2 source records", rep)
			}
			for _, pos := range []int64{0, 1} {
				_, err := f.Store.Source(ctx, "sess-a", pos)
				var ee *ledger.ErasedError
				if !errors.As(err, &ee) || !strings.Contains(ee.Erasure.Reason, "GDPR Art. 17 request #31") {
					t.Fatalf("alice's source at %d: %v, want erased", pos, err)
				}
			}
			if src, _ := sourceRecord(t, f.Store, "sess-b", 0); !strings.Contains(src, `"bob"`) {
				t.Fatalf("bob's source record: %s", src)
			}

			f.Integrate(t)
			var after bytes.Buffer
			sum, err := evidence.Build(ctx, f.Store, f.Log, "sess-a", &after, f.Options())
			if err != nil {
				t.Fatal(err)
			}
			if sum.Erased != 2 || !sum.Anchored {
				t.Fatalf("bundle after the erasure: %+v", sum)
			}
			for _, gone := range []string{`"user":"alice"`, "192.0.2.7"} {
				if bytes.Contains(after.Bytes(), []byte(gone)) {
					t.Fatalf("the bundle after the erasure still holds %q", gone)
				}
			}
			vr, err := verify.VerifyBundle(bytes.NewReader(after.Bytes()), f.Trust(t))
			if err != nil || !vr.Verified() || len(vr.Findings) != 0 {
				t.Fatalf("bundle after the erasure: %v, findings %+v", err, vr.Findings)
			}
			if len(vr.Notices) != 2 {
				t.Fatalf("notices %+v, want two payload_erased", vr.Notices)
			}
			for i, n := range vr.Notices {
				if n.Code != verify.CodePayloadErased || n.EntryIndex != i || n.Erasure == nil || n.Erasure.Payload != "source" ||
					n.Erasure.ErasedBy != "dpo@example.org" {
					t.Fatalf("notice %d: %+v", i, n)
				}
			}
			if vr.Head.String() != mustVerify(t, before.Bytes(), f.Trust(t)).Head.String() {
				t.Fatal("the head changed with the erasure")
			}
		})
	}
}

// TestOPASubjectPath: the subject path is checked before anything is
// read, each bad one refused with a message naming it; a decision's
// subject is the string there, none when absent or null, and a value of
// another type quarantines the decision naming the path.
func TestOPASubjectPath(t *testing.T) {
	for _, p := range []string{"input.user", "input.subject.id", "labels.tenant"} {
		if err := ingest.CheckOPASubjectPath(p); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
	for _, p := range []string{"", "input", "labels", "labels.a.b", "user", "decision_id", "input..user", ".input.user", "input.user.", "result.user"} {
		err := ingest.CheckOPASubjectPath(p)
		if err == nil || !strings.Contains(err.Error(), `"`+p+`"`) {
			t.Errorf("%q: %v, want an error naming it", p, err)
		}
	}

	ctx := context.Background()
	event := func(input, labels string) ingest.Raw {
		return ingest.Raw{File: "u.json", Record: 3, Bytes: []byte(`{"decision_id":"d","input":` + input + `,"labels":` + labels + `,"timestamp":"2026-12-01T10:00:00Z"}`)}
	}
	for _, tc := range []struct {
		name, path, input, labels string
		subject, quarantined      string
	}{
		{"input string", "input.user", `{"user":"alice"}`, `{"id":"o"}`, "alice", ""},
		{"nested", "input.subject.id", `{"subject":{"id":"u-42"}}`, `{"id":"o"}`, "u-42", ""},
		{"label", "labels.tenant", `{}`, `{"id":"o","tenant":"t-1"}`, "t-1", ""},
		{"absent", "input.user", `{}`, `{"id":"o"}`, "", ""},
		{"null", "input.user", `{"user":null}`, `{"id":"o"}`, "", ""},
		{"input not an object", "input.user", `"alice"`, `{"id":"o"}`, "", ""},
		{"number", "input.user", `{"user":42}`, `{"id":"o"}`, "", "u.json:3: decision d: the subject at input.user is not a string"},
		{"object", "input.user", `{"user":{"id":"a"}}`, `{"id":"o"}`, "", "u.json:3: decision d: the subject at input.user is not a string"},
		{"bad path", "user", `{"user":"alice"}`, `{"id":"o"}`, "",
			`u.json:3: decision d: subject path "user": want a member of the decision's input (input.user, input.subject.id) or a label (labels.NAME)`},
		{"too long", "input.user", `{"user":"` + strings.Repeat("a", ledger.MaxAgentIDBytes+1) + `"}`, `{"id":"o"}`, "",
			"u.json:3: decision d: the subject at input.user is longer than 256 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := ingest.OPAMapper{SubjectPath: tc.path}.Map(ctx, event(tc.input, tc.labels))
			if tc.quarantined != "" {
				if rec.Quarantine == nil || rec.Quarantine.Reason != ingest.ReasonSchemaInvalid || rec.Quarantine.Detail != tc.quarantined {
					t.Fatalf("quarantine %+v, want %q", rec.Quarantine, tc.quarantined)
				}
				return
			}
			if rec.Quarantine != nil || rec.Entry.AgentID != tc.subject {
				t.Fatalf("agent %q, quarantine %+v; want %q", rec.Entry.AgentID, rec.Quarantine, tc.subject)
			}
			if bytes.Contains(rec.Entry.Entry, []byte(`"input"`)) {
				t.Fatalf("the entry holds the input: %s", rec.Entry.Entry)
			}
		})
	}
}
