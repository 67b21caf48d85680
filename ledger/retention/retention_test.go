package retention_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/ledger/retention"
	"github.com/acsledger/acsledger/ledger/retention/retentiontest"
	"github.com/acsledger/acsledger/ledger/storeopen"
	"github.com/acsledger/acsledger/ledger/storetest"
	"github.com/acsledger/acsledger/verify"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var kinds = []string{"sqlite", "postgres"}

// onEachStore runs test on a fresh evidencetest fixture of each store kind.
func onEachStore(t *testing.T, test func(t *testing.T, ctx context.Context, f *evidencetest.Fixture)) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) { test(t, context.Background(), evidencetest.New(t, kind)) })
	}
}

// clock is a settable clock for the service.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// paramsState reads the params of every entry of a session: stored,
// erased (with its record) or never stored.
func paramsState(t *testing.T, f *evidencetest.Fixture, session string) (stored, erased int, erasures []ledger.Erasure) {
	t.Helper()
	ctx := context.Background()
	for e, err := range ledger.AllEntries(ctx, f.Store, session) {
		if err != nil {
			t.Fatal(err)
		}
		_, err := f.Store.Request(ctx, session, e.Position)
		var ee *ledger.ErasedError
		switch {
		case err == nil:
			stored++
		case errors.As(err, &ee):
			erased++
			erasures = append(erasures, ee.Erasure)
		case !errors.Is(err, ledger.ErrNotFound):
			t.Fatalf("params of %s position %d: %v", session, e.Position, err)
		}
	}
	return stored, erased, erasures
}

// verifyOffline builds the session's evidence bundle and verifies it as
// acsverify bundle does, with no finding.
func verifyOffline(t *testing.T, f *evidencetest.Fixture, session string) {
	t.Helper()
	f.Integrate(t)
	var buf bytes.Buffer
	sum, err := evidence.Build(context.Background(), f.Store, f.Log, session, &buf, f.Options())
	if err != nil {
		t.Fatalf("bundle of %s: %v", session, err)
	}
	rep, err := verify.VerifyBundle(bytes.NewReader(buf.Bytes()), f.Trust(t))
	if err != nil {
		t.Fatalf("VerifyBundle: %v", err)
	}
	if !rep.Verified() || len(rep.Findings) != 0 || !sum.Anchored || rep.Entries != int(sum.Entries) {
		t.Fatalf("bundle of %s: verified=%v findings %v, %+v", session, rep.Verified(), rep.Findings, sum)
	}
}

// adminRecords returns the admin session's entries of a step type today,
// as decoded JSON.
func adminRecords(t *testing.T, f *evidencetest.Fixture, at time.Time, stepType string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for e, err := range ledger.AllEntries(context.Background(), f.Store, retention.SessionID(at)) {
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(e.Content, &m); err != nil {
			t.Fatal(err)
		}
		if m["step_type"] == stepType {
			out = append(out, m)
		}
	}
	return out
}

// TestExpiryOnSchedule: a rule of 30 days erases nothing at 29 days and
// every payload at 31, records the sweep in the admin session with its
// count and per-session range, and the sessions still verify offline.
func TestExpiryOnSchedule(t *testing.T) {
	onEachStore(t, func(t *testing.T, ctx context.Context, f *evidencetest.Fixture) {
		start := time.Now().UTC()
		c := &clock{t: start}
		svc := retention.New(f.Store, retention.Options{Now: c.now, Batch: 2})
		if _, err := svc.SetRule(ctx, ledger.Rule{Name: "thirty", Period: 30 * 24 * time.Hour, Reason: "policy: 30 days", SetBy: "test"}); err != nil {
			t.Fatal(err)
		}
		stored0, _, _ := paramsState(t, f, f.HMACSession)
		stored1, _, _ := paramsState(t, f, f.ECDSASession)
		if stored0 < 3 || stored1 < 1 {
			t.Fatalf("fixture holds %d and %d params", stored0, stored1)
		}

		c.set(start.Add(29 * 24 * time.Hour))
		reps, err := svc.Sweep(ctx)
		if err != nil || len(reps) != 1 || reps[0].Erased != 0 {
			t.Fatalf("sweep at 29 days: %+v, %v", reps, err)
		}
		if s, _, _ := paramsState(t, f, f.HMACSession); s != stored0 {
			t.Fatalf("at 29 days %d params stored, want %d", s, stored0)
		}

		c.set(start.Add(31 * 24 * time.Hour))
		reps, err = svc.Sweep(ctx)
		if err != nil || len(reps) != 1 || reps[0].Erased != int64(stored0+stored1) || reps[0].Rule != "thirty" {
			t.Fatalf("sweep at 31 days: %+v, %v (want %d erased)", reps, err, stored0+stored1)
		}
		for _, s := range []string{f.HMACSession, f.ECDSASession} {
			st, er, es := paramsState(t, f, s)
			if st != 0 || er == 0 {
				t.Fatalf("%s after expiry: %d stored, %d erased", s, st, er)
			}
			if !strings.Contains(es[0].Reason, `retention rule "thirty"`) || es[0].ErasedBy != "acsledger retention sweep" {
				t.Errorf("erasure record %+v", es[0])
			}
			verifyOffline(t, f, s)
		}
		recs := adminRecords(t, f, c.now(), retention.StepSweep)
		if len(recs) != 1 || len(adminRecords(t, f, start.Add(29*24*time.Hour), retention.StepSweep)) != 1 {
			t.Fatalf("%d sweep records on day 31, want 1 (and 1 on day 29)", len(recs))
		}
		r := recs[0]["retention"].(map[string]any)
		if r["erased"].(float64) != float64(stored0+stored1) || len(r["sessions"].([]any)) != 2 || r["scope"].(map[string]any)["rule"].(map[string]any)["name"] != "thirty" {
			t.Fatalf("sweep record %v", r)
		}
		first := r["sessions"].([]any)[0].(map[string]any)
		if first["first_position"] == nil || first["last_position"] == nil || first["count"].(float64) < 1 {
			t.Fatalf("session range %v", first)
		}
		// The admin session itself verifies (it is an ordinary chain).
		verifyOffline(t, f, retention.SessionID(c.now()))
		// A second sweep finds nothing more.
		if reps, err := svc.Sweep(ctx); err != nil || reps[0].Erased != 0 {
			t.Fatalf("second sweep %+v %v", reps, err)
		}
	})
}

// TestHoldBlocksSweepAndErase: a hold on one session keeps a sweep, an
// erasure request and a manual erase off it (the erase names the case);
// once it is released the next sweep proceeds.
func TestHoldBlocksSweepAndErase(t *testing.T) {
	onEachStore(t, func(t *testing.T, ctx context.Context, f *evidencetest.Fixture) {
		start := time.Now().UTC()
		c := &clock{t: start}
		svc := retention.New(f.Store, retention.Options{Now: c.now})
		h, err := svc.SetHold(ctx, ledger.Hold{Case: "case-17", Sessions: []string{f.HMACSession}, Reason: "litigation", SetBy: "legal"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.SetHold(ctx, ledger.Hold{Case: "case-17", AgentPrefix: "x", Reason: "again"}); !errors.Is(err, ledger.ErrConflict) {
			t.Fatalf("second standing hold of a case: %v", err)
		}
		if _, err := svc.SetRule(ctx, ledger.Rule{Name: "r", AgentPrefix: "agent-", Period: 24 * time.Hour, Reason: "a day"}); err != nil {
			t.Fatal(err)
		}
		held0, _, _ := paramsState(t, f, f.HMACSession)

		c.set(start.Add(48 * time.Hour))
		if _, err := svc.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if s, e, _ := paramsState(t, f, f.HMACSession); s != held0 || e != 0 {
			t.Fatalf("held session after a sweep: %d stored, %d erased", s, e)
		}
		if s, _, _ := paramsState(t, f, f.ECDSASession); s != 0 {
			t.Fatalf("unheld session kept %d params", s)
		}
		// A manual erase is refused with the hold named.
		var pos int64 = -1
		for e, err := range ledger.AllEntries(ctx, f.Store, f.HMACSession) {
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Store.Request(ctx, f.HMACSession, e.Position); err == nil {
				pos = e.Position
				break
			}
		}
		_, err = f.Store.EraseParams(ctx, f.HMACSession, pos, "subject asked", "dpo")
		var he *ledger.HeldError
		if !errors.As(err, &he) || he.Case != "case-17" || !strings.Contains(err.Error(), `"case-17"`) {
			t.Fatalf("manual erase under hold: %v", err)
		}
		// An erasure request skips it too.
		rep, err := svc.Erase(ctx, retention.Request{AgentPrefix: "agent-", Until: c.now().Format(time.RFC3339), Reason: "subject asked", By: "dpo"})
		if err != nil || rep.Erased != 0 {
			t.Fatalf("erasure request under hold: %+v %v", rep, err)
		}
		if len(adminRecords(t, f, c.now(), retention.StepErasure)) != 1 {
			t.Fatal("the erasure request is not recorded")
		}

		rel, err := svc.ReleaseHold(ctx, "case-17", "legal", "case closed")
		if err != nil || rel.ReleasedAt.IsZero() || rel.ID != h.ID || len(rel.Sessions) != 1 {
			t.Fatalf("release: %+v %v", rel, err)
		}
		if _, err := svc.ReleaseHold(ctx, "case-17", "legal", "again"); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("second release: %v", err)
		}
		reps, err := svc.Sweep(ctx)
		if err != nil || len(reps) != 1 || reps[0].Erased != int64(held0) {
			t.Fatalf("sweep after release: %+v %v (want %d)", reps, err, held0)
		}
		if s, _, _ := paramsState(t, f, f.HMACSession); s != 0 {
			t.Fatalf("after release %d params stored", s)
		}
		if n := len(adminRecords(t, f, start, retention.StepHoldSet)); n != 1 {
			t.Fatalf("%d hold-set records", n)
		}
		if n := len(adminRecords(t, f, c.now(), retention.StepHoldRelease)); n != 1 {
			t.Fatalf("%d hold-release records", n)
		}
		all, err := f.Store.Holds(ctx, true)
		if err != nil || len(all) != 1 || all[0].ReleaseReason != "case closed" {
			t.Fatalf("holds: %+v %v", all, err)
		}
		if standing, err := f.Store.Holds(ctx, false); err != nil || len(standing) != 0 {
			t.Fatalf("standing holds: %+v %v", standing, err)
		}
		verifyOffline(t, f, f.HMACSession)
	})
}

// sourceErasure reads the source record at a position: nil while it is
// stored, its erasure once erased.
func sourceErasure(t *testing.T, f *evidencetest.Fixture, session string, position int64) *ledger.Erasure {
	t.Helper()
	_, err := f.Store.Source(context.Background(), session, position)
	var ee *ledger.ErasedError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		return &ee.Erasure
	}
	t.Fatalf("source record of %s position %d: %v", session, position, err)
	return nil
}

// TestSourceRecordsUnderRetention: a rule scoped to source_format opa
// expires the source record of an ingested OPA entry (and nothing else:
// not a bash-guard record, not the Guardian's params), its bundle still
// verifies offline with the erasure listed; a hold keeps a record from
// the sweep and refuses its erasure by hand naming the case, and the
// sweep after the release erases it.
func TestSourceRecordsUnderRetention(t *testing.T) {
	onEachStore(t, func(t *testing.T, ctx context.Context, f *evidencetest.Fixture) {
		res, err := f.Store.Ingest(ctx, []ledger.IngestRecord{
			storetest.SourceRecordFor("opa", "d-1", "ingested", 1),
			storetest.SourceRecordFor("bash-guard", "b-1", "ingested", 2),
			storetest.SourceRecordFor("opa", "d-2", "held", 1),
		})
		if err != nil || len(res) != 3 || res[2].Status != ledger.IngestAccepted {
			t.Fatalf("ingest: %+v, %v", res, err)
		}
		opa, bash, held := res[0].Position, res[1].Position, res[2].Position
		start := time.Now().UTC()
		c := &clock{t: start}
		svc := retention.New(f.Store, retention.Options{Now: c.now, Batch: 1})
		if _, err := svc.SetHold(ctx, ledger.Hold{Case: "case-9", Sessions: []string{"held"}, Reason: "litigation", SetBy: "legal"}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.SetRule(ctx, ledger.Rule{Name: "opa-inputs", SourceFormat: "opa", Period: 30 * 24 * time.Hour, Reason: "GDPR art. 5(1)(e)", SetBy: "test"}); err != nil {
			t.Fatal(err)
		}
		params0, _, _ := paramsState(t, f, f.HMACSession)
		// The dashboard's next expiry of the rule is its oldest
		// record's: recorded about now, so in about 30 days.
		st, err := f.Store.RetentionStatus(ctx)
		if err != nil || len(st.Rules) != 1 {
			t.Fatalf("status %+v, %v", st, err)
		}
		if d := time.Until(st.Rules[0].NextExpiry); d < 29*24*time.Hour || d > 30*24*time.Hour {
			t.Fatalf("next expiry of the opa rule in %s, want about 30 days", d)
		}

		c.set(start.Add(31 * 24 * time.Hour))
		reps, err := svc.Sweep(ctx)
		if err != nil || len(reps) != 1 || reps[0].Erased != 1 || len(reps[0].Sessions) != 1 ||
			reps[0].Sessions[0] != (ledger.ErasedRange{SessionID: "ingested", Count: 1, First: opa, Last: opa}) {
			t.Fatalf("sweep: %+v, %v (want the opa record of ingested)", reps, err)
		}
		e := sourceErasure(t, f, "ingested", opa)
		if e == nil || !strings.Contains(e.Reason, `retention rule "opa-inputs"`) || e.ErasedBy != "acsledger retention sweep" || e.Payload != ledger.PayloadSource {
			t.Fatalf("opa record after the sweep: %+v", e)
		}
		if sourceErasure(t, f, "ingested", bash) != nil || sourceErasure(t, f, "held", held) != nil {
			t.Fatal("the sweep erased a bash-guard record or a held one")
		}
		if s, _, _ := paramsState(t, f, f.HMACSession); s != params0 {
			t.Fatalf("a rule scoped to opa erased params: %d stored, want %d", s, params0)
		}
		// The admin session's record names the erased position.
		r := adminRecords(t, f, c.now(), retention.StepSweep)[0]["retention"].(map[string]any)
		if r["erased"].(float64) != 1 || r["sessions"].([]any)[0].(map[string]any)["session_id"] != "ingested" {
			t.Fatalf("sweep record %v", r)
		}

		// The bundle verifies offline and lists the erasure.
		verifyOffline(t, f, "ingested")
		var buf bytes.Buffer
		if _, err := evidence.Build(ctx, f.Store, f.Log, "ingested", &buf, f.Options()); err != nil {
			t.Fatal(err)
		}
		rep, err := verify.VerifyBundle(bytes.NewReader(buf.Bytes()), f.Trust(t))
		if err != nil || len(rep.Notices) != 1 || rep.Notices[0].Code != verify.CodePayloadErased || rep.Notices[0].EntryIndex != int(opa) {
			t.Fatalf("bundle notices %+v, %v (want payload_erased at %d)", rep.Notices, err, opa)
		}
		if !bytes.Contains(buf.Bytes(), []byte(`retention rule \"opa-inputs\"`)) {
			t.Error("the bundle does not carry the erasure's reason")
		}

		// By hand, the held record is refused naming the case.
		_, err = f.Store.EraseSource(ctx, "held", held, "subject asked", "dpo")
		var he *ledger.HeldError
		if !errors.As(err, &he) || he.Case != "case-9" || !strings.Contains(err.Error(), `"case-9"`) {
			t.Fatalf("EraseSource under hold: %v", err)
		}
		if sourceErasure(t, f, "held", held) != nil {
			t.Fatal("the refused erasure erased")
		}
		if _, err := svc.ReleaseHold(ctx, "case-9", "legal", "case closed"); err != nil {
			t.Fatal(err)
		}
		if reps, err := svc.Sweep(ctx); err != nil || reps[0].Erased != 1 || reps[0].Sessions[0].SessionID != "held" {
			t.Fatalf("sweep after release: %+v, %v", reps, err)
		}
		if sourceErasure(t, f, "held", held) == nil || sourceErasure(t, f, "ingested", bash) != nil {
			t.Fatal("after the release: the held record is kept or the bash-guard one erased")
		}
		verifyOffline(t, f, "held")
	})
}

// TestBadInput: each refusal names the field, and nothing is written.
func TestBadInput(t *testing.T) {
	onEachStore(t, func(t *testing.T, ctx context.Context, f *evidencetest.Fixture) {
		svc := retention.New(f.Store, retention.Options{})
		from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		for _, tc := range []struct {
			name, field string
			do          func() error
		}{
			{"rule period under a day", "period", func() error {
				_, err := svc.SetRule(ctx, ledger.Rule{Name: "r", Period: 23 * time.Hour, Reason: "x"})
				return err
			}},
			{"rule empty reason", "reason", func() error {
				_, err := svc.SetRule(ctx, ledger.Rule{Name: "r", Period: 48 * time.Hour, Reason: "  "})
				return err
			}},
			{"rule unknown source format", "scope.source_format", func() error {
				_, err := svc.SetRule(ctx, ledger.Rule{Name: "r", Period: 48 * time.Hour, Reason: "x", SourceFormat: "syslog"})
				return err
			}},
			{"hold empty reason", "reason", func() error {
				_, err := svc.SetHold(ctx, ledger.Hold{Case: "c", AgentPrefix: "a"})
				return err
			}},
			{"hold without scope", "scope", func() error {
				_, err := svc.SetHold(ctx, ledger.Hold{Case: "c", Reason: "x"})
				return err
			}},
			{"hold range ends before it starts", "scope.until", func() error {
				_, err := svc.SetHold(ctx, ledger.Hold{Case: "c", Reason: "x", From: from, Until: from.Add(-time.Hour)})
				return err
			}},
			{"erase without subject", "agent_prefix", func() error {
				_, err := svc.Erase(ctx, retention.Request{Until: from.Format(time.RFC3339), Reason: "x"})
				return err
			}},
			{"erase empty reason", "reason", func() error {
				_, err := svc.Erase(ctx, retention.Request{AgentPrefix: "a", Until: from.Format(time.RFC3339)})
				return err
			}},
			{"erase bad until", "until", func() error {
				_, err := svc.Erase(ctx, retention.Request{AgentPrefix: "a", Until: "yesterday", Reason: "x"})
				return err
			}},
		} {
			err := tc.do()
			var ie *ledger.InvalidRetentionError
			if !errors.As(err, &ie) || ie.Field != tc.field || !strings.HasPrefix(err.Error(), tc.field+": ") {
				t.Errorf("%s: %v, want a refusal naming %s", tc.name, err, tc.field)
			}
		}
		if rs, _ := f.Store.Rules(ctx); len(rs) != 0 {
			t.Errorf("rules written: %+v", rs)
		}
		if hs, _ := f.Store.Holds(ctx, true); len(hs) != 0 {
			t.Errorf("holds written: %+v", hs)
		}
		if _, err := f.Store.Session(ctx, retention.SessionID(time.Now())); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("admin session written: %v", err)
		}
	})
}

func TestParsePeriod(t *testing.T) {
	for in, want := range map[string]time.Duration{"180d": 180 * 24 * time.Hour, "6mo": 180 * 24 * time.Hour, "1y": 365 * 24 * time.Hour, "36h": 36 * time.Hour, "2w": 14 * 24 * time.Hour} {
		if got, err := retention.ParsePeriod(in); err != nil || got != want {
			t.Errorf("ParsePeriod(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "d", "1.5d", "-1d", "soon"} {
		if _, err := retention.ParsePeriod(in); err == nil {
			t.Errorf("ParsePeriod(%q) accepted", in)
		}
	}
}

// TestSweepBesideAppends sweeps 2,000 expired payloads in small batches
// while 16 writers append Guardian steps to sessions whose ids sort among
// the swept ones: every expired payload is erased and none of the new.
func TestSweepBesideAppends(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			db := retentiontest.NewStore(t, kind)
			const n = 2000
			retentiontest.SeedExpired(t, db, n, 64, "old", "old-agent")
			st, err := storeopen.Open(ctx, db, ledger.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			svc := retention.New(st, retention.Options{Batch: 50})
			if _, err := svc.SetRule(ctx, ledger.Rule{Name: "day", Period: 24 * time.Hour, Reason: "test"}); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			appended, wait := guardianLoad(t, st, "old-05x", 16, stop)
			reps, err := svc.Sweep(ctx)
			close(stop)
			wait() // before the deferred Close
			if err != nil {
				t.Fatal(err)
			}
			if len(reps) != 1 || reps[0].Erased != n {
				t.Fatalf("the sweep erased %+v, want %d (with %d appended beside it)", reps, n, appended.Load())
			}
			if appended.Load() == 0 {
				t.Fatal("nothing was appended during the sweep")
			}
		})
	}
}
