package ingest_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/ingest"
	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/verify"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var kinds = []string{"sqlite", "postgres"}

// run ingests raws with m into f's store and returns the results by
// record number.
func run(t *testing.T, f *evidencetest.Fixture, m ingest.Mapper, raws func(func(ingest.Raw) bool)) (ingest.Summary, map[int64]ledger.IngestResult) {
	t.Helper()
	got := make(map[int64]ledger.IngestResult)
	r := ingest.Runner{Store: f.Store.(ingest.Store), Batch: 3, OnResult: func(rec ledger.IngestRecord, res ledger.IngestResult) {
		got[rec.Record] = res
	}}
	sum, err := r.Run(context.Background(), m, raws)
	if err != nil {
		t.Fatal(err)
	}
	return sum, got
}

// exportVerify anchors what was written, exports session as a bundle and
// verifies it as an auditor with trust does.
func exportVerify(t *testing.T, f *evidencetest.Fixture, session string, opts evidence.Options, trust *verify.Trust) *verify.Report {
	t.Helper()
	f.Integrate(t)
	var buf bytes.Buffer
	sum, err := evidence.Build(context.Background(), f.Store, f.Log, session, &buf, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Anchored || sum.AnchoredThrough != sum.Entries {
		t.Fatalf("session %s: anchored %v through %d of %d entries", session, sum.Anchored, sum.AnchoredThrough, sum.Entries)
	}
	rep, err := verify.VerifyBundle(&buf, trust)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Verified() {
		t.Fatalf("session %s does not verify: %+v", session, rep.Findings)
	}
	return rep
}

func gzipped(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sourceRecord returns the source record stored beside the entry at
// position, and the entry's members; the entry commits to the record by
// its source_sha256 and does not hold it.
func sourceRecord(t *testing.T, s interface {
	ledger.ChainReader
	ledger.SourceReader
}, session string, position int64) (string, map[string]json.RawMessage) {
	t.Helper()
	es, err := s.Entries(context.Background(), session, position, 1)
	if err != nil || len(es) != 1 {
		t.Fatalf("entry %s/%d: %v", session, position, err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(es[0].Content, &m); err != nil {
		t.Fatal(err)
	}
	if _, inline := m["source_record"]; inline {
		t.Fatalf("entry %s/%d holds its source inline: %s", session, position, es[0].Content)
	}
	src, err := s.Source(context.Background(), session, position)
	if err != nil {
		t.Fatalf("source of %s/%d: %v", session, position, err)
	}
	sum := sha256.Sum256(src)
	if want := `"` + hex.EncodeToString(sum[:]) + `"`; string(m["source_sha256"]) != want {
		t.Fatalf("entry %s/%d: source_sha256 %s, the stored source hashes to %s", session, position, m["source_sha256"], want)
	}
	return string(src), m
}

const opaEvents = `[
 {"decision_id":"d-1","path":"authz/allow","input":{"session_id":"sess-opa","user":"alice"},"result":true,
  "bundles":{"authz":{"revision":"rev-7"}},"labels":{"id":"opa-1","version":"1.4.0"},
  "nd_builtin_cache":{"time.now_ns":{"[]":1764583200123456789}},"erased":["/input/password"],"masked":["/input/ssn"],
  "timestamp":"2026-12-01T10:00:00.123456789Z"},
 {"decision_id":"d-2","path":"authz/allow","input":{"user":"bob"},"labels":{"id":"opa-1"},"timestamp":"2026-12-01T10:00:01Z"},
 {"decision_id":"d-3","path":"authz/allow","input":{"session_id":"sess-opa"},"result":null,"labels":{"id":"opa-1"},"timestamp":"2026-12-01T10:00:02Z"},
 {"path":"authz/allow","labels":{"id":"opa-1"},"timestamp":"2026-12-01T10:00:03Z"},
 {"decision_id":"d-4","decision_id":"d-5","labels":{"id":"opa-1"},"timestamp":"2026-12-01T10:00:04Z"},
 {"decision_id":"d-1","path":"authz/allow","input":{"session_id":"sess-opa","user":"alice"},"result":true,
  "bundles":{"authz":{"revision":"rev-7"}},"labels":{"id":"opa-1","version":"1.4.0"},
  "nd_builtin_cache":{"time.now_ns":{"[]":1764583200123456789}},"erased":["/input/password"],"masked":["/input/ssn"],
  "timestamp":"2026-12-01T10:00:00.123456789Z"}
]`

func TestOPA(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			f := evidencetest.New(t, kind)
			body := gzipped(t, []byte(opaEvents))
			sum, got := run(t, f, ingest.OPAMapper{}, ingest.ArrayElements(bytes.NewReader(body), "upload.json.gz"))
			if sum != (ingest.Summary{Accepted: 3, Duplicate: 1, Quarantined: 2}) {
				t.Fatalf("summary %+v", sum)
			}
			if got[4].Reason != ingest.ReasonSchemaInvalid || got[5].Reason != ingest.ReasonMalformedJSON || got[6].Status != ledger.IngestDuplicate {
				t.Fatalf("results %+v", got)
			}
			if got[1].SessionID != "sess-opa" || got[2].SessionID != "opa:opa-1" || got[3].SessionID != "sess-opa" || got[3].Position != 1 {
				t.Fatalf("sessions: %+v", got)
			}
			src, m := sourceRecord(t, f.Store, "sess-opa", 0)
			if !strings.Contains(src, "1764583200123456789") {
				t.Fatalf("the source record lost the big integer: %s", src)
			}
			var d struct {
				Result         json.RawMessage `json:"result"`
				NDBuiltinCache string          `json:"nd_builtin_cache"`
				PolicyVersions []struct {
					PolicyID, Version string
				} `json:"policy_versions"`
				Erased []string `json:"erased"`
				Masked []string `json:"masked"`
			}
			json.Unmarshal(m["decision"], &d)
			if d.NDBuiltinCache != `{"time.now_ns":{"[]":1764583200123456789}}` || string(d.Result) != "true" ||
				len(d.PolicyVersions) != 1 || d.PolicyVersions[0].Version != "rev-7" || d.Erased[0] != "/input/password" || d.Masked[0] != "/input/ssn" {
				t.Fatalf("decision %s", m["decision"])
			}
			// Undefined stays undefined; null stays null.
			_, m2 := sourceRecord(t, f.Store, "opa:opa-1", 0)
			if bytes.Contains(m2["decision"], []byte(`"result"`)) {
				t.Fatalf("an undefined decision got a result: %s", m2["decision"])
			}
			_, m3 := sourceRecord(t, f.Store, "sess-opa", 1)
			if !bytes.Contains(m3["decision"], []byte(`"result":null`)) {
				t.Fatalf("a null result was not kept: %s", m3["decision"])
			}
			qs, err := f.Store.(ledger.IngestStore).Quarantined(context.Background(), ledger.IngestFilter{Source: "opa"})
			if err != nil || len(qs) != 2 || qs[0].Record != 4 || !strings.HasPrefix(qs[1].Detail, "upload.json.gz:5: ") {
				t.Fatalf("quarantine %+v, %v", qs, err)
			}
			exportVerify(t, f, "sess-opa", f.Options(), f.Trust(t))
			exportVerify(t, f, "opa:opa-1", f.Options(), f.Trust(t))

			// A broken array: the elements before the break are kept, the
			// rest is quarantined with what followed.
			broken := `[{"decision_id":"d-9","labels":{"id":"opa-2"},"timestamp":"2026-12-01T10:00:00Z"}, {"decision_id": ]`
			sum, got = run(t, f, ingest.OPAMapper{SessionPath: "labels.session"}, ingest.ArrayElements(strings.NewReader(broken), "b.json"))
			if sum != (ingest.Summary{Accepted: 1, Quarantined: 1}) || got[1].SessionID != "opa:opa-2" || got[2].Reason != ingest.ReasonMalformedJSON {
				t.Fatalf("broken array: %+v %+v", sum, got)
			}
		})
	}
}

// TestOPAInputErased: an ingested OPA decision's input names a person;
// its source record (the only place the input is) is erased, and the
// session's bundle still verifies offline, listing the erasure with who,
// when and why; the bundle holds the input no longer, before it did.
func TestOPAInputErased(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			f := evidencetest.New(t, kind)
			const person = "alice.liddell@example.org"
			body := `[{"decision_id":"d-pii","path":"authz/allow","input":{"session_id":"sess-pii","user":"` + person + `"},"result":true,` +
				`"labels":{"id":"opa-1"},"timestamp":"2026-12-01T10:00:00Z"},` +
				`{"decision_id":"d-next","path":"authz/allow","input":{"session_id":"sess-pii","user":"bob"},"result":false,` +
				`"labels":{"id":"opa-1"},"timestamp":"2026-12-01T10:00:01Z"}]`
			if sum, _ := run(t, f, ingest.OPAMapper{}, ingest.ArrayElements(strings.NewReader(body), "upload.json")); sum.Accepted != 2 {
				t.Fatalf("summary %+v", sum)
			}
			es, err := f.Store.Entries(ctx, "sess-pii", 0, 10)
			if err != nil || len(es) != 2 || bytes.Contains(es[0].Content, []byte(person)) {
				t.Fatalf("entries %v: the chained entry must not hold the input", err)
			}
			f.Integrate(t)
			var before bytes.Buffer
			if _, err := evidence.Build(ctx, f.Store, f.Log, "sess-pii", &before, f.Options()); err != nil {
				t.Fatal(err)
			}
			first := body[1:strings.Index(body, `,{"decision_id":"d-next"`)]
			carried := []byte(`"source":"` + base64.StdEncoding.EncodeToString([]byte(first)) + `"`)
			if !bytes.Contains(before.Bytes(), carried) {
				t.Fatalf("the bundle does not carry the source record while it exists:\n%s", before.Bytes())
			}
			if rep, err := verify.VerifyBundle(bytes.NewReader(before.Bytes()), f.Trust(t)); err != nil || !rep.Verified() || len(rep.Notices) != 0 {
				t.Fatalf("bundle before the erasure: %v, findings %v, notices %v", err, rep.Findings, rep.Notices)
			}

			e, err := f.Store.EraseSource(ctx, "sess-pii", 0, "GDPR Art. 17 request #12", "dpo@example.org")
			if err != nil {
				t.Fatal(err)
			}
			var after bytes.Buffer
			sum, err := evidence.Build(ctx, f.Store, f.Log, "sess-pii", &after, f.Options())
			if err != nil {
				t.Fatal(err)
			}
			if sum.Sources != 1 || sum.Erased != 1 || sum.Missing != 0 || !sum.Anchored {
				t.Fatalf("summary after the erasure %+v", sum)
			}
			// Nothing of the input is left: not in the clear, not as the
			// carried record.
			if bytes.Contains(after.Bytes(), []byte(person)) || bytes.Contains(after.Bytes(), carried) {
				t.Fatal("the bundle after the erasure still holds the erased input")
			}
			rep, err := verify.VerifyBundle(bytes.NewReader(after.Bytes()), f.Trust(t))
			if err != nil || !rep.Verified() || len(rep.Findings) != 0 {
				t.Fatalf("bundle after the erasure: %v, findings %v", err, rep.Findings)
			}
			if len(rep.Notices) != 1 || rep.Notices[0].Code != verify.CodePayloadErased || rep.Notices[0].EntryIndex != 0 {
				t.Fatalf("notices %+v, want one payload_erased at entry 0", rep.Notices)
			}
			got := rep.Notices[0].Erasure
			if got == nil || got.Payload != "source" || got.Reason != e.Reason || got.ErasedBy != e.ErasedBy || !got.ErasedAt.Equal(e.ErasedAt) {
				t.Fatalf("the notice's erasure %+v, want %+v", got, e)
			}
			// The chain and its proofs are the same bytes: the first step
			// differs only by its payload members.
			if rep.Head.String() != mustVerify(t, before.Bytes(), f.Trust(t)).Head.String() {
				t.Fatal("the head changed with the erasure")
			}
		})
	}
}

func mustVerify(t *testing.T, b []byte, trust *verify.Trust) *verify.Report {
	t.Helper()
	rep, err := verify.VerifyBundle(bytes.NewReader(b), trust)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func readFile(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBashGuard(t *testing.T) {
	var schema struct {
		Examples []json.RawMessage `json:"examples"`
	}
	if err := json.Unmarshal(readFile(t, "schemas/bashguard/decision-output.v1.unlock.json"), &schema); err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	for _, e := range schema.Examples {
		var c bytes.Buffer
		json.Compact(&c, e)
		lines = append(lines, c.Bytes())
	}
	mk := func(id, source, session, host string) []byte {
		md := map[string]any{"engine": "opa", "rulebook_digest": "dee3746bf7b5"}
		if session != "" {
			md["session_id"] = session
		}
		if host != "" {
			md["hostname"] = host
		}
		b, _ := json.Marshal(map[string]any{"schema_version": "1.0", "decision": "allow", "action": "allow", "source": source,
			"reasons": []any{}, "input": map[string]any{"raw": "ls"}, "metadata": md,
			"evaluated_at": "2026-12-01T10:00:00.000Z", "decision_id": id})
		return b
	}
	lines = append(lines,
		mk("00000000-0000-4000-8000-000000000001", "fail-open-keyless", "ses_abc123", ""),
		mk("00000000-0000-4000-8000-000000000002", "opa-unlocked", "", "box-2"),
		mk("00000000-0000-4000-8000-000000000003", "unlock-filter-error", "", ""),
		mk("not-a-uuid", "opa", "ses_abc123", ""),
		[]byte(`{"schema_version":"1.0",`),
	)
	input := bytes.Join(lines, []byte("\n"))
	n := int64(len(schema.Examples))
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			f := evidencetest.New(t, kind)
			sum, got := run(t, f, ingest.BashGuardMapper{}, ingest.Lines(bytes.NewReader(input), "guard.jsonl"))
			if sum.Accepted != int(n)+3 || sum.Quarantined != 2 {
				t.Fatalf("summary %+v: %+v", sum, got)
			}
			if got[n+4].Reason != ingest.ReasonSchemaInvalid || got[n+5].Reason != ingest.ReasonMalformedJSON {
				t.Fatalf("quarantined: %+v %+v", got[n+4], got[n+5])
			}
			if got[n+2].SessionID != "bash-guard:host:box-2" || got[n+3].SessionID != "bash-guard:file:guard.jsonl" || got[1].SessionID != "ses_abc123" {
				t.Fatalf("sessions: %+v", got)
			}
			is := f.Store.(ledger.IngestStore)
			for flag, want := range map[string][]string{
				ingest.FlagFailOpen:          {got[n].Key, got[n+1].Key}, // the examples end with a fail-open
				ingest.FlagFailOpenKeyless:   {got[n+1].Key},
				ingest.FlagUnlockBypass:      {got[n+2].Key},
				ingest.FlagUnlockFilterError: {got[n+3].Key},
			} {
				rs, err := is.Flagged(context.Background(), flag, ledger.IngestFilter{Source: "bash-guard"})
				if err != nil {
					t.Fatal(err)
				}
				var keys []string
				for _, r := range rs {
					keys = append(keys, r.Key)
				}
				if strings.Join(keys, ",") != strings.Join(want, ",") {
					t.Errorf("flag %s: %v, want %v", flag, keys, want)
				}
			}
			_, m := sourceRecord(t, f.Store, "ses_abc123", 0)
			if !bytes.Contains(m["decision"], []byte(`"version":"dee3746bf7b5"`)) {
				t.Fatalf("no rulebook digest as policy version: %s", m["decision"])
			}
			exportVerify(t, f, "ses_abc123", f.Options(), f.Trust(t))

			// Audit lines link to their decision.
			audit := fmt.Sprintf(`{"decision_id":%q,"decision":"allow","source":"fail-open-keyless","command":"ls","rule_ids":[],"evaluated_at":"2026-12-01T10:00:00.000Z"}`+"\n"+
				`{"decision_id":"zz","decision":"allow","source":"opa","command":"ls","rule_ids":[],"evaluated_at":"2026-12-01T10:00:00.000Z"}`+"\n"+
				`{"decision_id":"zz","decision":"maybe","source":"opa","command":"ls","rule_ids":[],"evaluated_at":"2026-12-01T10:00:00.000Z"}`+"\n",
				got[n+1].Key)
			sum, ga := run(t, f, ingest.BashGuardAuditMapper{Store: f.Store.(ingest.Store)}, ingest.Lines(strings.NewReader(audit), "audit.jsonl"))
			if sum != (ingest.Summary{Accepted: 2, Quarantined: 1}) || ga[1].SessionID != "ses_abc123" || ga[2].SessionID != "bash-guard-audit:file:audit.jsonl" {
				t.Fatalf("audit: %+v %+v", sum, ga)
			}
			_, am := sourceRecord(t, f.Store, "ses_abc123", ga[1].Position)
			var ref struct {
				Position  int64  `json:"position"`
				EntryHash string `json:"entry_hash"`
			}
			json.Unmarshal(am["decision_entry"], &ref)
			if ref.Position != got[n+1].Position || ref.EntryHash != got[n+1].EntryHash.String() {
				t.Fatalf("audit line links to %+v, want position %d", ref, got[n+1].Position)
			}
			exportVerify(t, f, "ses_abc123", f.Options(), f.Trust(t))
		})
	}
}

// a2hLine is an archived delivery signed with secret, as a Hub pushes it.
func a2hLine(t *testing.T, secret []byte, callback string, at time.Time, jti, inReplyTo, resID, resolution string) []byte {
	t.Helper()
	// The resolution is immutable: a redelivery carries the same body.
	resp := map[string]any{"value": "approve", "actor": "human:alice", "resolved_at": "2026-12-01T09:59:30Z"}
	body, _ := json.Marshal(map[string]any{"a2h_version": "0.3", "in_reply_to": inReplyTo, "resolution_id": resID,
		"agent": map[string]string{"id": "bot", "run_id": "r"}, "resolution": resolution, "response": resp})
	digest, err := ingest.PayloadSHA256(mustJSON(resp), nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := fmt.Sprint(at.Unix())
	sc, _ := json.Marshal(map[string]string{"a2h_version": "0.3", "callback_url": callback, "id": inReplyTo, "in_reply_to": inReplyTo,
		"jti": jti, "payload_sha256": digest, "resolution": resolution, "resolution_id": resID, "resolved_at": resp["resolved_at"].(string), "t": ts})
	canon, err := acs.Canonicalize(sc)
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(canon)
	line, _ := json.Marshal(ingest.A2HDelivery{ReceivedAt: at.Add(2 * time.Second).UTC().Format(time.RFC3339), CallbackURL: callback,
		Headers: map[string]string{"A2H-Signature": fmt.Sprintf("t=%s,jti=%s,v1=%s", ts, jti, base64.RawURLEncoding.EncodeToString(mac.Sum(nil)))},
		Body:    string(body)})
	return line
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func TestA2H(t *testing.T) {
	secret := []byte("hub secret")
	cb := "https://ledger.example/api/v1/ingest/a2h"
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			f := evidencetest.New(t, kind)
			ctx := context.Background()
			// An ASK the Guardian chained, in the Guardian's entry shape.
			askID := "7f0c2d1e-0000-4000-8000-00000000a5c0"
			if _, err := f.Store.Append(ctx, ledger.Record{SessionID: f.ECDSASession, Writer: ledger.WriterGuardian, Entry: fmt.Appendf(nil,
				`{"entry_id":"e-ask","step_id":%q,"step_type":"intent_extension","timestamp":"2026-12-01T09:59:00Z","decision":{"disposition":"ask","reason_codes":[]}}`, askID)}); err != nil {
				t.Fatal(err)
			}
			lines := [][]byte{
				a2hLine(t, secret, cb, at, "j1", askID, "res-1", "answered"),
				a2hLine(t, secret, cb, at, "j2", "msg-task", "res-2", "completed"),
				a2hLine(t, secret, cb, at.Add(time.Minute), "j3", askID, "res-1", "answered"), // the Hub's redelivery
				a2hLine(t, secret, cb, at, "j1", "msg-other", "res-9", "answered"),            // a replayed jti
				a2hLine(t, []byte("wrong"), cb, at, "j4", "msg-x", "res-4", "answered"),
				a2hLine(t, secret, cb, at, "j5", "msg-task", "res-5", "answered"), // not an answer to a task
				[]byte(`{"received_at":"2026-12-01T10:00:00Z"`),
			}
			m := ingest.A2HMapper{
				Verifier:     ingest.A2HVerifier{Keys: []ingest.A2HKey{{ID: "hub", HMAC: secret}}},
				Store:        f.Store.(ingest.Store),
				MessageTypes: map[string]string{"msg-task": "task"},
			}
			sum, got := run(t, f, m, ingest.Lines(bytes.NewReader(bytes.Join(lines, []byte("\n"))), "deliveries.jsonl"))
			if sum != (ingest.Summary{Accepted: 2, Duplicate: 1, Quarantined: 4}) {
				t.Fatalf("summary %+v: %+v", sum, got)
			}
			for rec, reason := range map[int64]string{4: ingest.ReasonReplayedJTI, 5: ingest.ReasonSignatureMismatch, 6: ingest.ReasonResolutionType, 7: ingest.ReasonMalformedJSON} {
				if got[rec].Reason != reason {
					t.Errorf("record %d: %+v, want %s", rec, got[rec], reason)
				}
			}
			if got[1].SessionID != f.ECDSASession || got[3].Position != got[1].Position || got[2].SessionID != "a2h:msg-task" {
				t.Fatalf("sessions: %+v", got)
			}
			_, e := sourceRecord(t, f.Store, f.ECDSASession, got[1].Position)
			if !bytes.Contains(e["answers"], []byte(askID)) && !bytes.Contains(e["answers"], []byte(f.ECDSASession)) {
				t.Fatalf("the resolution does not name the ASK: %s", e["answers"])
			}
			// The auditor re-checks the Hub's signature from the bundle's
			// entry alone.
			src, _ := sourceRecord(t, f.Store, f.ECDSASession, got[1].Position)
			var d ingest.A2HDelivery
			if err := json.Unmarshal([]byte(src), &d); err != nil || !bytes.Equal([]byte(src), lines[0]) {
				t.Fatalf("source record %q", src)
			}
			exportVerify(t, f, f.ECDSASession, f.Options(), f.Trust(t))
			exportVerify(t, f, "a2h:msg-task", f.Options(), f.Trust(t))
		})
	}
}

// TestACS ingests another Guardian's traffic: the fixture's Guardian is
// the other one, its request/response pairs the input, and a second store
// the ledger that takes them in.
func TestACS(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			// dst first: it records the baseline policy before the other
			// Guardian decides under it.
			dst := evidencetest.New(t, kind)
			other := evidencetest.New(t, "sqlite")
			keys, err := sig.NewKeySet(other.HMAC.Public(), other.ECDSA.Public())
			if err != nil {
				t.Fatal(err)
			}
			var withEntry, bare [][]byte
			for _, sess := range []string{other.ECDSASession, other.HMACSession} {
				es, err := other.Store.Entries(ctx, sess, 0, 100)
				if err != nil {
					t.Fatal(err)
				}
				for i, e := range es {
					var step evidencetest.Step
					for _, s := range other.Steps {
						if s.RequestID == e.StepID {
							step = s
						}
					}
					resp, err := other.Store.Response(ctx, sess, e.Position)
					if err != nil {
						t.Fatal(err)
					}
					req := mustJSON(map[string]any{"jsonrpc": "2.0", "id": i + 2, "method": step.Method, "params": step.Params})
					withEntry = append(withEntry, mustJSON(map[string]json.RawMessage{"request": req, "response": resp, "entry": e.Content}))
					bare = append(bare, mustJSON(map[string]json.RawMessage{"request": req, "response": resp}))
				}
			}
			// One pair with a response whose signature was tampered with.
			tampered := bytes.Replace(withEntry[1], []byte(`"decision":"deny"`), []byte(`"decision":"allow"`), 1)
			if bytes.Equal(tampered, withEntry[1]) {
				t.Fatalf("the second step is no deny: %s", withEntry[1])
			}
			input := append([][]byte{tampered}, withEntry...)
			m := ingest.ACSMapper{Keys: keys}
			sum, got := run(t, dst, m, ingest.Lines(bytes.NewReader(bytes.Join(input, []byte("\n"))), "pairs.jsonl"))
			if sum != (ingest.Summary{Accepted: len(withEntry), Quarantined: 1}) || got[1].Reason != ingest.ReasonSignatureInvalid {
				t.Fatalf("summary %+v: %+v", sum, got)
			}
			trust := other.Trust(t)
			trust.Checkpoint = verify.CheckpointPolicy{LogKeys: []string{dst.LogVerifier}}
			exportVerify(t, dst, other.ECDSASession, evidence.Options{ResponseKeys: []*sig.PublicKey{other.ECDSA.Public()}}, trust)
			exportVerify(t, dst, other.HMACSession, evidence.Options{}, trust)

			// Re-running is all duplicates; pairs without the Guardian's
			// entries give entries whose heads the Guardian never published.
			sum, _ = run(t, dst, m, ingest.Lines(bytes.NewReader(bytes.Join(withEntry, []byte("\n"))), "pairs.jsonl"))
			if sum != (ingest.Summary{Duplicate: len(withEntry)}) {
				t.Fatalf("re-run %+v", sum)
			}
			fresh := evidencetest.New(t, "sqlite")
			sum, got = run(t, fresh, m, ingest.Lines(bytes.NewReader(bytes.Join(bare, []byte("\n"))), "bare.jsonl"))
			if sum.Quarantined != len(bare) || got[1].Reason != ingest.ReasonChainMismatch {
				t.Fatalf("bare pairs %+v: %+v", sum, got[1])
			}
		})
	}
}
