package evidence_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/verify"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var kinds = []string{"sqlite", "postgres"}

func build(t *testing.T, f *evidencetest.Fixture, log evidence.Log, session string, opts evidence.Options) ([]byte, evidence.Summary) {
	t.Helper()
	var buf bytes.Buffer
	sum, err := evidence.Build(context.Background(), f.Store, log, session, &buf, opts)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return buf.Bytes(), sum
}

func verifyBytes(t *testing.T, b []byte, trust *verify.Trust) *verify.Report {
	t.Helper()
	rep, err := verify.VerifyBundle(bytes.NewReader(b), trust)
	if err != nil {
		t.Fatalf("VerifyBundle: %v\n%s", err, b)
	}
	return rep
}

func codesOf(fs []verify.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Code)
	}
	return out
}

func TestBuildVerifies(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			f := evidencetest.New(t, kind)
			for _, tc := range []struct {
				session string
				entries int64
			}{{f.HMACSession, 4}, {f.ECDSASession, 2}} {
				b, sum := build(t, f, f.Log, tc.session, f.Options())
				if sum.Entries != tc.entries || sum.Responses != tc.entries || !sum.Anchored || sum.AnchoredThrough != tc.entries || sum.TreeSize != 6 {
					t.Errorf("summary %+v, want %d entries and responses, anchored through %d in a tree of 6", sum, tc.entries, tc.entries)
				}
				rep := verifyBytes(t, b, f.Trust(t))
				if !rep.Verified() || rep.Entries != int(tc.entries) {
					t.Fatalf("bundle of %s: verified=%v entries=%d findings %v", tc.session, rep.Verified(), rep.Entries, rep.Findings)
				}
				if len(rep.Notices) != 0 {
					t.Errorf("notices with full trust: %v", rep.Notices)
				}
				sess, _ := f.Store.Session(context.Background(), tc.session)
				if rep.Head != sess.Head {
					t.Errorf("report head %s, store head %s", rep.Head, sess.Head)
				}
			}
			// The ECDSA session also verifies with only the keys the
			// bundle carries, and says so.
			b, _ := build(t, f, f.Log, f.ECDSASession, f.Options())
			rep := verifyBytes(t, b, &verify.Trust{})
			if !rep.Verified() || !strings.Contains(strings.Join(codesOf(rep.Notices), ","), verify.CodeKeysFromBundle) {
				t.Errorf("with the bundle's own keys: findings %v notices %v", rep.Findings, rep.Notices)
			}
		})
	}
}

func TestBuildTampered(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			f := evidencetest.New(t, kind)
			b, _ := build(t, f, f.Log, f.HMACSession, evidence.Options{ResponseKeys: f.Options().ResponseKeys, IncludePolicies: true})
			if rep := verifyBytes(t, b, f.Trust(t)); !rep.Verified() {
				t.Fatalf("untampered bundle: %v", rep.Findings)
			}
			cases := []struct {
				name, old, new string
				code           string
				index          int
			}{
				// The denied curl|bash step (position 1) rewritten as allowed
				// in the stored entry.
				{"entry decision", `"disposition":"deny"`, `"disposition":"allow"`, verify.CodeEntryHashMismatch, 1},
				// The signed answer rewritten: the finding is at the entry
				// it answers.
				{"response decision", `"decision":"deny"`, `"decision":"allow"`, verify.CodeResponseSignatureInvalid, 1},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					if !bytes.Contains(b, []byte(c.old)) {
						t.Fatalf("bundle has no %s", c.old)
					}
					rep := verifyBytes(t, bytes.Replace(b, []byte(c.old), []byte(c.new), 1), f.Trust(t))
					if rep.Verified() || len(rep.Findings) == 0 || rep.Findings[0].Code != c.code || rep.Findings[0].EntryIndex != c.index {
						t.Errorf("findings %+v, want first %s at %d", rep.Findings, c.code, c.index)
					}
				})
			}
			t.Run("dropped step", func(t *testing.T) {
				// Cut the second step (position 1) out of the steps array.
				parts := bytes.SplitAfter(b, []byte(`{"entry":`))
				if len(parts) != 5 {
					t.Fatalf("%d steps", len(parts)-1)
				}
				// parts[i] ends with the opening of step i, so leaving
				// out parts[2] (the body of step 1) drops exactly that step.
				dropped := bytes.Join(append(parts[:2:2], parts[3:]...), nil)
				rep := verifyBytes(t, dropped, f.Trust(t))
				if len(rep.Findings) == 0 || rep.Findings[0].Code != verify.CodePreviousHashMismatch || rep.Findings[0].EntryIndex != 1 {
					t.Errorf("findings %+v, want first %s at 1", rep.Findings, verify.CodePreviousHashMismatch)
				}
			})
			t.Run("policy content", func(t *testing.T) {
				var doc struct {
					PolicyBundles []verify.PolicyBundleRecord `json:"policy_bundles"`
				}
				if err := json.Unmarshal(b, &doc); err != nil || len(doc.PolicyBundles) == 0 || len(doc.PolicyBundles[0].Content) == 0 {
					t.Fatalf("policy bundles with content: %v %v", doc.PolicyBundles, err)
				}
				// Flip one byte of the first bundle's content (base64 in the
				// bundle): re-encode with the byte changed.
				orig, _ := json.Marshal(doc.PolicyBundles[0].Content)
				c := bytes.Clone(doc.PolicyBundles[0].Content)
				c[len(c)/2] ^= 1
				mut, _ := json.Marshal(c)
				rep := verifyBytes(t, bytes.Replace(b, orig, mut, 1), f.Trust(t))
				if got := codesOf(rep.Findings); len(got) == 0 || got[0] != verify.CodePolicyDigestMismatch {
					t.Errorf("findings %v, want %s", got, verify.CodePolicyDigestMismatch)
				}
			})
		})
	}
}

func TestBuildWithoutLog(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	b, sum := build(t, f, nil, f.HMACSession, f.Options())
	if sum.Anchored || sum.TreeSize != 0 || bytes.Contains(b, []byte(`"checkpoints"`)) || bytes.Contains(b, []byte(`"anchors"`)) {
		t.Fatalf("a bundle built without a log claims anchoring: %+v", sum)
	}
	rep := verifyBytes(t, b, f.Trust(t))
	if got := codesOf(rep.Findings); len(got) != 1 || got[0] != verify.CodeNotAnchored {
		t.Errorf("findings %v, want only %s", got, verify.CodeNotAnchored)
	}
}

func TestBuildUnknownSession(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	var buf bytes.Buffer
	_, err := evidence.Build(context.Background(), f.Store, f.Log, "no-such-session", &buf, evidence.Options{})
	if !errors.Is(err, ledger.ErrNotFound) || buf.Len() != 0 {
		t.Errorf("err %v, %d bytes written; want ErrNotFound and nothing", err, buf.Len())
	}
}

func TestVerifyAndReverify(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	ctx := context.Background()
	rep, err := evidence.Verify(ctx, f.Store, f.Log, f.HMACSession, f.Options(), f.Trust(t))
	if err != nil || !rep.Verified() || rep.Entries != 4 {
		t.Fatalf("Verify: %v %+v", err, rep)
	}
	// Without the log, every session is unanchored: the run names both.
	r := evidence.NewReverifier(f.Store, nil, f.Options(), f.Trust(t), nil, nil)
	st, err := r.RunNow(ctx)
	if err != nil || st.Sessions != 2 || st.Entries != 6 || st.Failed != 2 || len(st.FailedSessions) != 2 || st.FailedSessions[0].Codes[0] != verify.CodeNotAnchored {
		t.Fatalf("unanchored run: %v %+v", err, st)
	}
	r = evidence.NewReverifier(f.Store, f.Log, f.Options(), f.Trust(t), nil, nil)
	if st, err = r.RunNow(ctx); err != nil || st.Sessions != 2 || st.Failed != 0 || st.Error != "" {
		t.Fatalf("anchored run: %v %+v", err, st)
	}
	if cur, last := r.Status(); cur != nil || last == nil || last.Sessions != 2 {
		t.Errorf("status after a run: %+v %+v", cur, last)
	}
}

// TestBuildNotYetInTheLog: a session appended after the log's latest
// checkpoint (none of its entries has a leaf yet) gets a bundle with that
// checkpoint and no anchor, verifying to not_anchored; and a whole-ledger
// re-verification over it finishes, counting it as failing, rather than
// crashing the server it runs in.
func TestBuildNotYetInTheLog(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	appendPlain(t, f.Store, "late", 2)
	b, sum := build(t, f, f.Log, "late", f.Options())
	if sum.Anchored || sum.TreeSize == 0 || !bytes.Contains(b, []byte(`"checkpoints"`)) || bytes.Contains(b, []byte(`"anchors"`)) {
		t.Fatalf("summary %+v: want the checkpoint (size > 0) and no anchor", sum)
	}
	rep := verifyBytes(t, b, f.Trust(t))
	if got := codesOf(rep.Findings); !slices.Contains(got, verify.CodeNotAnchored) {
		t.Errorf("findings %v, want %s among them", got, verify.CodeNotAnchored)
	}

	r := evidence.NewReverifier(f.Store, f.Log, f.Options(), f.Trust(t), nil, nil)
	st, err := r.RunNow(context.Background())
	if err != nil || st.Error != "" {
		t.Fatalf("run: %v, status error %q", err, st.Error)
	}
	var late *evidence.FailedSession
	for i := range st.FailedSessions {
		if st.FailedSessions[i].SessionID == "late" {
			late = &st.FailedSessions[i]
		}
	}
	if st.Sessions != 3 || late == nil || !slices.Contains(late.Codes, verify.CodeNotAnchored) {
		t.Errorf("run %+v: want 3 sessions and %q failing with %s", st, "late", verify.CodeNotAnchored)
	}
}

// TestBuildSinceSizeRefused: a SinceSize beyond the log's latest checkpoint
// (one it never signed, or no longer has) is ledger.ErrNotFound, and
// one without a log is ErrNoLog; neither writes a byte, so that the CLI
// and the API can say so instead of handing out a bundle that cannot show
// it extends the earlier one.
func TestBuildSinceSizeRefused(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	_, head := f.Checkpoint(t)
	for _, c := range []struct {
		name string
		log  evidence.Log
		size uint64
		want error
	}{
		{"beyond the latest checkpoint", f.Log, head.Size + 10, ledger.ErrNotFound},
		{"without a log", nil, 1, evidence.ErrNoLog},
	} {
		var buf bytes.Buffer
		_, err := evidence.Build(context.Background(), f.Store, c.log, f.HMACSession, &buf, evidence.Options{SinceSize: c.size})
		if !errors.Is(err, c.want) || buf.Len() != 0 {
			t.Errorf("%s: %v, %d bytes written; want %v and nothing written", c.name, err, buf.Len(), c.want)
		}
	}
	// At the latest size itself the bundle carries that one checkpoint.
	b, _ := build(t, f, f.Log, f.HMACSession, evidence.Options{SinceSize: head.Size})
	var bundle struct {
		Checkpoints []string `json:"checkpoints"`
	}
	if err := json.Unmarshal(b, &bundle); err != nil || len(bundle.Checkpoints) != 1 {
		t.Errorf("since the latest size: %v, %d checkpoints, want 1", err, len(bundle.Checkpoints))
	}
}
