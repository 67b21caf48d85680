package evidence_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/verify"
)

// plainEntry is a content-bearing ContextEntry written without a Guardian:
// no signed response publishes its head, so it verifies to
// entry_without_response.
func plainEntry(session string, n int) []byte {
	return fmt.Appendf(nil, `{"entry_id":"%s-e%03d","step_id":"%s-req-%03d","step_type":"steps/toolCallRequest",`+
		`"timestamp":"2026-03-14T14:02:%02d.000Z","request_hash":"5b8b6336ec4634d5d69f3a2007aa6f483d1e23f1d68b2b29acad7ad024448b7e",`+
		`"decision":"ALLOW","provenance_summary":{"entry_count":0,"origins_seen":[]}}`, session, n, session, n, n%60)
}

// appendPlain writes a session of n plain entries.
func appendPlain(t *testing.T, st ledger.Store, session string, n int) {
	t.Helper()
	for i := range n {
		if _, err := st.Append(context.Background(), ledger.Record{SessionID: session, AgentID: "agent-9", Entry: plainEntry(session, i)}); err != nil {
			t.Fatalf("append %s/%d: %v", session, i, err)
		}
	}
}

// lateSessions is a real store that writes a new session between the
// run's count and its first page of verification, as a Guardian writing
// during a run would, and anchors it.
type lateSessions struct {
	evidence.Store
	t     *testing.T
	f     *evidencetest.Fixture
	mu    sync.Mutex
	calls int
}

func (s *lateSessions) Sessions(ctx context.Context, f ledger.SessionFilter) (ledger.SessionPage, error) {
	s.mu.Lock()
	s.calls++
	if s.calls == 2 { // the count read one page; verification starts
		appendPlain(s.t, s.f.Store, "late", 1)
		s.f.Integrate(s.t)
	}
	s.mu.Unlock()
	return s.Store.Sessions(ctx, f)
}

// TestReverifyKeepsFindings runs over a ledger whose ECDSA session has its
// DENY rewritten into an ALLOW and which holds a session of 12 entries no
// signed response confirms: the run knows its total and keeps, per failing
// session, the first findings exactly as the session's verification
// reported them, and how many there were.
func TestReverifyKeepsFindings(t *testing.T) {
	ctx := context.Background()
	f := evidencetest.New(t, "sqlite")
	const many = evidence.MaxFindingsPerSession + 2
	appendPlain(t, f.Store, "many", many)
	f.Integrate(t)
	f.TamperEntry(t, f.ECDSASession, 1, `"disposition":"deny"`, `"disposition":"allow"`)

	// What each failing session's own verification says, before the run.
	want := map[string]*verify.Report{}
	for _, id := range []string{f.ECDSASession, "many"} {
		rep, err := evidence.Verify(ctx, f.Store, f.Log, id, f.Options(), f.Trust(t))
		if err != nil {
			t.Fatalf("Verify %s: %v", id, err)
		}
		want[id] = rep
	}

	r := evidence.NewReverifier(f.Store, f.Log, f.Options(), f.Trust(t), nil, nil)
	st, err := r.RunNow(ctx)
	if err != nil || st.Error != "" {
		t.Fatalf("RunNow: %v %+v", err, st)
	}
	if st.Running || st.Counting || st.Total != 3 || st.Sessions != 3 || st.Entries != 4+2+many || st.Failed != 2 || len(st.FailedSessions) != 2 {
		t.Fatalf("run: %+v; want total 3, 3 sessions, %d entries, 2 failed and listed", st, 4+2+many)
	}
	got := map[string]evidence.FailedSession{}
	for _, fs := range st.FailedSessions {
		got[fs.SessionID] = fs
	}
	if _, ok := got[f.HMACSession]; ok {
		t.Errorf("the untouched session %s is listed as failing", f.HMACSession)
	}

	t.Run("tampered", func(t *testing.T) {
		fs, ok := got[f.ECDSASession]
		if !ok {
			t.Fatalf("%s not listed: %+v", f.ECDSASession, st.FailedSessions)
		}
		if len(fs.Findings) == 0 {
			t.Fatal("no findings kept")
		}
		first := fs.Findings[0]
		if first.Code != verify.CodeEntryHashMismatch || first.EntryIndex != 1 || first.Expected == "" || first.Actual == "" ||
			!strings.Contains(first.Message, "not to its stated entry_hash "+first.Actual) {
			t.Errorf("first finding %+v: want %s at entry 1 saying the content no longer hashes to the stated entry_hash", first, verify.CodeEntryHashMismatch)
		}
		if fs.FindingsTotal != len(want[f.ECDSASession].Findings) || !reflect.DeepEqual(fs.Findings, want[f.ECDSASession].Findings) {
			t.Errorf("kept findings (total %d):\n%+v\nverification reports:\n%+v", fs.FindingsTotal, fs.Findings, want[f.ECDSASession].Findings)
		}
		if fs.Codes[0] != verify.CodeEntryHashMismatch {
			t.Errorf("codes %v", fs.Codes)
		}
	})

	t.Run("capped", func(t *testing.T) {
		fs, ok := got["many"]
		if !ok {
			t.Fatalf("many not listed: %+v", st.FailedSessions)
		}
		if fs.FindingsTotal != many || len(fs.Findings) != evidence.MaxFindingsPerSession {
			t.Fatalf("findings_total %d, %d kept; want %d and %d", fs.FindingsTotal, len(fs.Findings), many, evidence.MaxFindingsPerSession)
		}
		if !reflect.DeepEqual(fs.Findings, want["many"].Findings[:evidence.MaxFindingsPerSession]) {
			t.Errorf("kept findings are not the first %d the verification reports:\n%+v", evidence.MaxFindingsPerSession, fs.Findings)
		}
		for i, x := range fs.Findings {
			if x.Code != verify.CodeEntryWithoutResponse || x.EntryIndex != i || x.StepID != fmt.Sprintf("many-req-%03d", i) ||
				!strings.Contains(x.Message, "No signed response publishes the head") {
				t.Errorf("finding %d: %+v", i, x)
			}
		}
		if !reflect.DeepEqual(fs.Codes, []string{verify.CodeEntryWithoutResponse}) {
			t.Errorf("codes %v, want only %s", fs.Codes, verify.CodeEntryWithoutResponse)
		}
	})

	t.Run("status", func(t *testing.T) {
		cur, last := r.Status()
		if cur != nil || last == nil || last.Total != 3 || len(last.FailedSessions) != 2 || last.FailedSessions[0].FindingsTotal == 0 {
			t.Errorf("status after the run: %+v %+v", cur, last)
		}
	})

	t.Run("session created during the run", func(t *testing.T) {
		late := &lateSessions{Store: f.Store, t: t, f: f}
		st, err := evidence.NewReverifier(late, f.Log, f.Options(), f.Trust(t), nil, nil).RunNow(ctx)
		if err != nil || st.Error != "" {
			t.Fatalf("RunNow: %v %+v", err, st)
		}
		if st.Total != 3 || st.Sessions != 4 || st.Failed != 3 {
			t.Errorf("total %d, sessions %d, failed %d; want the 3 counted, 4 checked (the late one too), 3 failed", st.Total, st.Sessions, st.Failed)
		}
	})
}

// heldSessions is a real store whose listing waits for the test on the
// call-th call, so that a run can be seen between its phases.
type heldSessions struct {
	evidence.Store
	call    int
	reached chan struct{}
	release chan struct{}
	mu      sync.Mutex
	calls   int
}

func (s *heldSessions) Sessions(ctx context.Context, f ledger.SessionFilter) (ledger.SessionPage, error) {
	s.mu.Lock()
	s.calls++
	hold := s.calls == s.call
	s.mu.Unlock()
	if hold {
		close(s.reached)
		<-s.release
	}
	return s.Store.Sessions(ctx, f)
}

// TestReverifyPhases watches a run while it counts (running, counting,
// total 0) and once it has counted (total known, nothing checked yet).
func TestReverifyPhases(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	for _, tc := range []struct {
		name     string
		call     int
		counting bool
		total    int64
	}{
		{"counting", 1, true, 0},
		{"counted", 2, false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &heldSessions{Store: f.Store, call: tc.call, reached: make(chan struct{}), release: make(chan struct{})}
			r := evidence.NewReverifier(st, f.Log, f.Options(), f.Trust(t), nil, nil)
			if err := r.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			<-st.reached
			cur, _ := r.Status()
			close(st.release)
			if cur == nil || !cur.Running || cur.Counting != tc.counting || cur.Total != tc.total || cur.Sessions != 0 {
				t.Errorf("held at listing %d: %+v; want running, counting %v, total %d, nothing checked", tc.call, cur, tc.counting, tc.total)
			}
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
				if cur, last := r.Status(); cur == nil {
					if last == nil || last.Counting || last.Total != 2 || last.Sessions != 2 || last.Failed != 0 {
						t.Errorf("finished run: %+v", last)
					}
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Fatal("the run did not finish in 10 s")
		})
	}
}

// faultyLog is the fixture's log with a fault planted in one call: the
// kind of bug a background run must survive.
type faultyLog struct{ evidence.Log }

func (faultyLog) Checkpoint(context.Context) ([]byte, error) { panic("planted fault") }

// TestReverifyPanicEndsTheRun: a panic inside a run ends the run with an
// error in its status; the process, a server in production, goes on.
func TestReverifyPanicEndsTheRun(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	r := evidence.NewReverifier(f.Store, faultyLog{f.Log}, f.Options(), f.Trust(t), nil, nil)
	st, err := r.RunNow(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(st.Error, "planted fault") || st.Running || st.Finished.IsZero() {
		t.Errorf("status %+v: want a finished run whose error names the panic", st)
	}
	if cur, last := r.Status(); cur != nil || last == nil || last.Error != st.Error {
		t.Errorf("Status() = %+v, %+v: want no run going and the failed one last", cur, last)
	}
}
