package evidence_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/ledger/storetest"
	"github.com/acsledger/acsledger/verify"
)

// erasedMember matches a step's "erased" member as Build writes it.
var erasedMember = regexp.MustCompile(`,"erased":\[[^\]]*\]`)

// TestErasedParamsStillVerify erases the params of every step of a
// session: its evidence bundle is the bytes of before with each step's
// erasure record added, and verifies with no findings, one payload_erased
// notice per step carrying who, when and why, since the chain commits to
// params only through request_hash (docs/storage.md, "Request params").
func TestErasedParamsStillVerify(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			f := evidencetest.New(t, kind)
			before, _ := build(t, f, f.Log, f.HMACSession, f.Options())
			erased := 0
			for e, err := range ledger.AllEntries(ctx, f.Store, f.HMACSession) {
				if err != nil {
					t.Fatal(err)
				}
				_, err := f.Store.EraseParams(ctx, f.HMACSession, e.Position, "test erasure", "evidence_test")
				switch {
				case err == nil:
					erased++
				case !errors.Is(err, ledger.ErrNotFound):
					t.Fatalf("erase position %d: %v", e.Position, err)
				}
			}
			if erased < 3 {
				t.Fatalf("erased the params of %d steps; the fixture's session should have at least 3", erased)
			}
			after, sum := build(t, f, f.Log, f.HMACSession, f.Options())
			if got := erasedMember.ReplaceAll(after, nil); !bytes.Equal(before, got) {
				t.Errorf("the bundle changed beyond its erasure records:\n%s\n%s", before, after)
			}
			if sum.Erased != int64(erased) || sum.Missing != 0 {
				t.Errorf("summary %+v, want %d erasures and nothing missing", sum, erased)
			}
			rep := verifyBytes(t, after, f.Trust(t))
			if !rep.Verified() || len(rep.Findings) != 0 || rep.Entries != int(sum.Entries) || !sum.Anchored {
				t.Fatalf("bundle after the erasure: verified=%v findings %v, %+v", rep.Verified(), rep.Findings, sum)
			}
			if len(rep.Notices) != erased {
				t.Fatalf("notices %v, want %d payload_erased", rep.Notices, erased)
			}
			for _, n := range rep.Notices {
				if n.Code != verify.CodePayloadErased || n.Erasure == nil || n.Erasure.Payload != "params" || n.Erasure.Reason != "test erasure" ||
					n.Erasure.ErasedBy != "evidence_test" || n.Erasure.ErasedAt.IsZero() || !strings.Contains(n.Message, `by "evidence_test"`) {
					t.Errorf("notice %+v", n)
				}
			}
			// Online, with the params held against request_hash, the same.
			on, err := evidence.Verify(ctx, f.Store, f.Log, f.HMACSession, f.Options(), f.Trust(t))
			if err != nil || !on.Verified() || len(on.Notices) != erased {
				t.Fatalf("online verification after the erasure: %v, findings %v, notices %v", err, on.Findings, on.Notices)
			}
		})
	}
}

// TestParamsCarriedAndChecked: with IncludeParams each step carries its
// params, which the verifier holds against request_hash; online
// verification does so always.
func TestParamsCarriedAndChecked(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			f := evidencetest.New(t, kind)
			opts := f.Options()
			opts.IncludeParams = true
			b, sum := build(t, f, f.Log, f.HMACSession, opts)
			if sum.Params < 3 || sum.Params != sum.Responses {
				t.Fatalf("summary %+v: want every step's params carried", sum)
			}
			rep := verifyBytes(t, b, f.Trust(t))
			if !rep.Verified() || len(rep.Notices) != 0 {
				t.Fatalf("bundle with params: findings %v notices %v", rep.Findings, rep.Notices)
			}
			// One params byte changed in the bundle: payload_mismatch at
			// that step, and only there.
			i := bytes.Index(b, []byte(`,"params":"`)) + len(`,"params":"`)
			end := i + bytes.IndexByte(b[i:], '"')
			raw, err := base64.StdEncoding.DecodeString(string(b[i:end]))
			if err != nil {
				t.Fatal(err)
			}
			raw = bytes.Replace(raw, []byte(`:`), []byte(`: 1, "x":`), 1) // one more member

			tampered := slices.Concat(b[:i], []byte(base64.StdEncoding.EncodeToString(raw)), b[end:])
			rep = verifyBytes(t, tampered, f.Trust(t))
			if got := codesOf(rep.Findings); !slices.Equal(got, []string{verify.CodePayloadMismatch}) || rep.Findings[0].EntryIndex != 0 {
				t.Fatalf("tampered params: findings %v", rep.Findings)
			}
		})
	}
}

// TestPayloadMissing: payloads deleted by a database superuser, around
// the erasure path (no erasure recorded), are payload_missing: online, in
// re-verification, and offline in the exported bundle. Erased payloads
// beside them are not.
func TestPayloadMissing(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			f := evidencetest.New(t, kind)
			// Two ingested records with their source kept beside, one
			// record in the old form (source inline), in one session.
			res, err := f.Store.Ingest(ctx, []ledger.IngestRecord{
				storetest.IngestRecordFor("opa", "old", "ingested", 0),
				storetest.SourceRecordFor("opa", "d-1", "ingested", 1),
				storetest.SourceRecordFor("opa", "d-2", "ingested", 2),
			})
			if err != nil || res[2].Status != ledger.IngestAccepted {
				t.Fatalf("ingest: %+v, %v", res, err)
			}
			if _, err := f.Store.EraseSource(ctx, "ingested", 2, "retention period over", "sweeper"); err != nil {
				t.Fatal(err)
			}
			f.Integrate(t)
			rep, err := evidence.Verify(ctx, f.Store, f.Log, "ingested", f.Options(), f.Trust(t))
			if err != nil || !rep.Verified() {
				t.Fatalf("before the deletion: %v, findings %v", err, rep.Findings)
			}
			if got := codesOf(rep.Notices); !slices.Equal(got, []string{verify.CodePayloadErased, verify.CodeSourceInline}) || rep.Notices[1].EntryIndex != 0 || rep.Notices[1].Actual != "1" {
				t.Fatalf("notices %+v, want payload_erased then source_inline at 0", rep.Notices)
			}

			// A superuser deletes a source record and a Guardian step's
			// params, with no erasure recorded.
			step := f.Steps[0]
			var pos int64 = -1
			for e, err := range ledger.AllEntries(ctx, f.Store, step.SessionID) {
				if err != nil {
					t.Fatal(err)
				}
				if e.StepID == step.RequestID {
					pos = e.Position
				}
			}
			f.Superuser(t,
				`DELETE FROM source_records WHERE session_id = 'ingested' AND position = 1`,
				fmt.Sprintf(`DELETE FROM request_params WHERE session_id = '%s' AND position = %d`, step.SessionID, pos))

			for _, c := range []struct{ session, want string }{{"ingested", "source"}, {step.SessionID, "params"}} {
				rep, err := evidence.Verify(ctx, f.Store, f.Log, c.session, f.Options(), f.Trust(t))
				if err != nil {
					t.Fatal(err)
				}
				if got := codesOf(rep.Findings); !slices.Equal(got, []string{verify.CodePayloadMissing}) || rep.Verified() {
					t.Fatalf("%s after deleting its %s: findings %v", c.session, c.want, rep.Findings)
				}
				if !strings.Contains(rep.Findings[0].Message, map[string]string{"source": "source record", "params": "request params"}[c.want]) {
					t.Errorf("finding %+v does not name the %s", rep.Findings[0], c.want)
				}
				// The exported bundle says the same offline.
				b, sum := build(t, f, f.Log, c.session, f.Options())
				if sum.Missing != 1 {
					t.Errorf("%s: summary %+v, want 1 missing", c.session, sum)
				}
				off := verifyBytes(t, b, f.Trust(t))
				if got := codesOf(off.Findings); !slices.Equal(got, []string{verify.CodePayloadMissing}) {
					t.Fatalf("%s offline: findings %v", c.session, off.Findings)
				}
			}
			// The bundle's maker cannot hide a source: without the
			// "missing" member the entry's source_sha256 still asks for it.
			b, _ := build(t, f, f.Log, "ingested", f.Options())
			b = bytes.Replace(b, []byte(`,"missing":["source"]`), nil, 1)
			if got := codesOf(verifyBytes(t, b, f.Trust(t)).Findings); !slices.Equal(got, []string{verify.CodePayloadMissing}) {
				t.Fatalf("bundle without its missing member: findings %v", got)
			}

			// Re-verification of the whole ledger names both sessions.
			rv := evidence.NewReverifier(f.Store, f.Log, f.Options(), f.Trust(t), nil, nil)
			got := reverifyFindings(t, rv)
			for _, s := range []string{"ingested", step.SessionID} {
				if !slices.Contains(got[s], verify.CodePayloadMissing) {
					t.Errorf("re-verification of %s: %v, want payload_missing", s, got[s])
				}
			}
		})
	}
}

// reverifyFindings runs a whole-ledger re-verification and returns the
// codes of each failed session.
func reverifyFindings(t *testing.T, r *evidence.Reverifier) map[string][]string {
	t.Helper()
	st, err := r.RunNow(context.Background())
	if err != nil || st.Error != "" {
		t.Fatalf("RunNow: %v %+v", err, st)
	}
	out := map[string][]string{}
	for _, fs := range st.FailedSessions {
		out[fs.SessionID] = fs.Codes
	}
	return out
}
