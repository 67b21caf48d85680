package evidence_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/verify"
)

// findingCodes lists the codes of fs in order.
func findingCodes(fs []verify.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Code)
	}
	return out
}

// cutTail deletes the last n entries of a session with their responses and
// params and moves its head back to the entry before them, as a database
// superuser can: the chain that is left verifies on its own.
func cutTail(t *testing.T, f *evidencetest.Fixture, session string, n int64) (length int64) {
	t.Helper()
	sess, err := f.Store.Session(context.Background(), session)
	if err != nil {
		t.Fatal(err)
	}
	keep := sess.Length - n
	where := fmt.Sprintf("session_id = '%s' AND position >= %d", session, keep)
	f.Superuser(t,
		"DELETE FROM request_params WHERE "+where,
		"DELETE FROM responses WHERE "+where,
		"DELETE FROM entries WHERE "+where,
		fmt.Sprintf("UPDATE heads SET length = %d, head = (SELECT entry_hash FROM entries WHERE session_id = '%s' AND position = %d) WHERE session_id = '%s'",
			keep, session, keep-1, session),
	)
	return sess.Length
}

// TestDeletedTailDoesNotVerify is the superuser's tamper: the last two
// entries of a logged session are deleted with their responses and params,
// and its head moved back. The Merkle log still holds their leaves, so the
// session's verification, the whole-ledger re-verification and a bundle
// exported afterwards all say the tail was cut.
func TestDeletedTailDoesNotVerify(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			f := evidencetest.New(t, kind)
			session := f.HMACSession // the long one
			rep, err := evidence.Verify(ctx, f.Store, f.Log, session, f.Options(), f.Trust(t))
			if err != nil || !rep.Verified() {
				t.Fatalf("before the tamper: %v %+v", err, rep)
			}
			was := cutTail(t, f, session, 2)
			if sess, err := f.Store.Session(ctx, session); err != nil || sess.Length != was-2 {
				t.Fatalf("after the tamper the store says %+v, %v; want length %d", sess, err, was-2)
			}

			rep, err = evidence.Verify(ctx, f.Store, f.Log, session, f.Options(), f.Trust(t))
			if err != nil {
				t.Fatal(err)
			}
			codes := findingCodes(rep.Findings)
			if rep.Verified() || !slices.Contains(codes, verify.CodeTruncated) || !slices.Contains(codes, verify.CodeAnchorWithoutEntry) {
				t.Fatalf("verify after the cut: codes %v; want %s and %s", codes, verify.CodeTruncated, verify.CodeAnchorWithoutEntry)
			}
			for _, fd := range rep.Findings {
				if fd.Code == verify.CodeTruncated && (fd.Expected != fmt.Sprintf("at least %d entries", was) || fd.Actual != fmt.Sprintf("%d entries", was-2)) {
					t.Errorf("truncated finding %+v: want expected %d entries, actual %d", fd, was, was-2)
				}
			}

			st, err := evidence.NewReverifier(f.Store, f.Log, f.Options(), f.Trust(t), nil, nil).RunNow(ctx)
			if err != nil || st.Failed != 1 || len(st.FailedSessions) != 1 || st.FailedSessions[0].SessionID != session ||
				!slices.Contains(st.FailedSessions[0].Codes, verify.CodeTruncated) {
				t.Fatalf("re-verification: %v %+v; want %s failing with %s", err, st, session, verify.CodeTruncated)
			}

			var buf bytes.Buffer
			if _, err := evidence.Build(ctx, f.Store, f.Log, session, &buf, f.Options()); err != nil {
				t.Fatal(err)
			}
			off, err := verify.VerifyBundle(&buf, f.Trust(t))
			if err != nil {
				t.Fatal(err)
			}
			if off.Verified() || !slices.Contains(findingCodes(off.Findings), verify.CodeAnchorWithoutEntry) {
				t.Fatalf("the bundle exported after the cut: %v; want %s", findingCodes(off.Findings), verify.CodeAnchorWithoutEntry)
			}
		})
	}
}

// TestLoggedEntryReplaced replaces a logged entry's row, hash and all, and
// deletes one in the middle of a chain: each disagrees with its leaf.
func TestLoggedEntryReplaced(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			f := evidencetest.New(t, kind)
			replaced, deleted := f.ECDSASession, f.HMACSession
			f.Superuser(t,
				fmt.Sprintf("UPDATE entries SET entry_hash = (SELECT entry_hash FROM entries WHERE session_id = '%s' AND position = 0) WHERE session_id = '%[1]s' AND position = 1", replaced),
				fmt.Sprintf("DELETE FROM request_params WHERE session_id = '%s' AND position = 1", deleted),
				fmt.Sprintf("DELETE FROM responses WHERE session_id = '%s' AND position = 1", deleted),
				fmt.Sprintf("DELETE FROM entries WHERE session_id = '%s' AND position = 1", deleted),
			)
			for session, want := range map[string]string{replaced: verify.CodeLoggedEntryMismatch, deleted: verify.CodeLoggedEntryMissing} {
				rep, err := evidence.Verify(ctx, f.Store, f.Log, session, f.Options(), f.Trust(t))
				if err != nil {
					t.Fatal(err)
				}
				var got *verify.Finding
				for i, fd := range rep.Findings {
					if fd.Code == want {
						got = &rep.Findings[i]
					}
				}
				if got == nil || got.EntryIndex != 1 || got.Expected == "" || got.Expected == got.Actual {
					t.Errorf("session %s: findings %+v; want %s at position 1", session, rep.Findings, want)
				}
			}
		})
	}
}

// TestDeletedSessionFailsReverification deletes a whole logged session,
// its sessions and heads rows included, so that the store no longer lists
// it: no session's verification can see it, and the run reports the
// logged entries the store lost.
func TestDeletedSessionFailsReverification(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			f := evidencetest.New(t, kind)
			gone := f.ECDSASession
			sess, err := f.Store.Session(ctx, gone)
			if err != nil {
				t.Fatal(err)
			}
			where := fmt.Sprintf("session_id = '%s'", gone)
			f.Superuser(t,
				"DELETE FROM request_params WHERE "+where,
				"DELETE FROM responses WHERE "+where,
				"DELETE FROM requests WHERE "+where,
				"DELETE FROM entries WHERE "+where,
				"DELETE FROM heads WHERE "+where,
				"DELETE FROM sessions WHERE "+where,
			)
			st, err := evidence.NewReverifier(f.Store, f.Log, f.Options(), f.Trust(t), nil, nil).RunNow(ctx)
			if err != nil || st.Error != "" {
				t.Fatalf("RunNow: %v %+v", err, st)
			}
			if st.Failed != 0 || st.LoggedNotStored != sess.Length {
				t.Fatalf("run %+v: want no failing session listed and %d logged entries not stored", st, sess.Length)
			}
		})
	}
}
