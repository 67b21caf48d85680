package evidence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/acsledger/acsledger/internal/tick"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/verify"
)

// ErrRunning is returned by Reverifier.Start while a run is in progress.
var ErrRunning = errors.New("a re-verification run is already in progress")

// A run's result is bounded whatever the ledger holds: it names at most
// MaxFailedListed failing sessions and keeps at most MaxFindingsPerSession
// findings of each, so at most 1000 findings in all.
const (
	MaxFailedListed       = 100
	MaxFindingsPerSession = 10
)

// A Reverifier re-verifies the whole ledger, session by session, as
// Verify does for one: for an operator who wants to know that nothing was
// rewritten behind the database's back since the evidence was written. One
// run at a time; Status reports the progress of the current run and the
// result of the last finished one.
type Reverifier struct {
	store Store
	log   Log
	opts  Options
	trust *verify.Trust
	now   func() time.Time
	slog  *slog.Logger

	mu      sync.Mutex
	current *RunStatus
	last    *RunStatus
}

// RunStatus is one run's progress or result.
type RunStatus struct {
	Running  bool      `json:"running"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished,omitzero"`
	// Counting is true while the run counts the sessions, before it
	// verifies any; Total is 0 until it is done.
	Counting bool `json:"counting"`
	// Total is the number of sessions in the ledger when the run started.
	// Sessions created during the run are checked too, so Sessions may end
	// above Total; a run that stopped early ends below it.
	Total int64 `json:"total"`
	// Sessions checked so far; Failed of them had findings.
	Sessions int64 `json:"sessions"`
	Entries  int64 `json:"entries"`
	Failed   int64 `json:"failed"`
	// FailedSessions names up to MaxFailedListed failing sessions with the
	// findings the run saw.
	FailedSessions []FailedSession `json:"failed_sessions"`
	// LoggedNotStored is how many entries the log held leaves for when
	// the run started beyond all the entries the run found in the store
	// (Entries): entries deleted after they were logged, including whole
	// sessions, which no session's verification can report because the
	// store no longer lists them. A run with it above 0 failed.
	LoggedNotStored int64 `json:"logged_not_stored,omitempty"`
	// Error is set when the run stopped before checking every session.
	Error string `json:"error,omitempty"`
}

// FailedSession is a session that did not verify, as this run saw it: the
// findings are what its verification reported then, not what the session
// verifies to now (someone may have "repaired" a row since).
type FailedSession struct {
	SessionID string `json:"session_id"`
	// Codes are the distinct codes of all its findings, first seen first.
	Codes []string `json:"codes"`
	// Findings are its first MaxFindingsPerSession findings, in the order
	// the verification reported them; FindingsTotal is how many it had.
	Findings      []verify.Finding `json:"findings"`
	FindingsTotal int              `json:"findings_total"`
}

// NewReverifier returns a Reverifier over store and log (nil: no
// anchoring is checked, and every session reports not_anchored), verifying
// with trust. now and logger may be nil.
func NewReverifier(store Store, log Log, opts Options, trust *verify.Trust, now func() time.Time, logger *slog.Logger) *Reverifier {
	if now == nil {
		now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Reverifier{store: store, log: log, opts: opts, trust: trust, now: now, slog: logger}
}

// Start begins a run in the background and returns at once; ErrRunning if
// one is in progress. The run stops early when ctx ends.
func (r *Reverifier) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.current != nil {
		return ErrRunning
	}
	r.current = r.newRun()
	go r.run(ctx)
	return nil
}

// RunNow runs once and returns the result, or ErrRunning.
func (r *Reverifier) RunNow(ctx context.Context) (RunStatus, error) {
	r.mu.Lock()
	if r.current != nil {
		r.mu.Unlock()
		return RunStatus{}, ErrRunning
	}
	r.current = r.newRun()
	r.mu.Unlock()
	r.run(ctx)
	_, last := r.Status()
	return *last, nil
}

func (r *Reverifier) newRun() *RunStatus {
	return &RunStatus{Running: true, Counting: true, Started: r.now().UTC(), FailedSessions: []FailedSession{}}
}

// Status returns the current run (nil when idle) and the last finished one
// (nil before the first).
func (r *Reverifier) Status() (current, last *RunStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.current != nil {
		c := *r.current
		c.FailedSessions = append([]FailedSession{}, c.FailedSessions...)
		current = &c
	}
	if r.last != nil {
		l := *r.last
		last = &l
	}
	return current, last
}

// Schedule runs every interval until ctx ends, skipping a tick while a
// run started by Start is still going.
func (r *Reverifier) Schedule(ctx context.Context, interval time.Duration) {
	tick.Every(ctx, interval, nil, func() {
		if _, err := r.RunNow(ctx); err != nil && !errors.Is(err, ErrRunning) {
			r.slog.Error("scheduled re-verification failed", "err", err)
		}
	})
}

func (r *Reverifier) run(ctx context.Context) {
	err := r.eachRecovered(ctx)
	r.mu.Lock()
	st := r.current
	st.Running = false
	st.Finished = r.now().UTC()
	if err != nil {
		st.Error = err.Error()
	}
	r.last, r.current = st, nil
	r.mu.Unlock()

	outcome := outcomeVerified
	switch {
	case err != nil:
		outcome = outcomeError
		r.slog.Error("re-verification stopped", "err", err, "sessions", st.Sessions)
	case st.Failed > 0 || st.LoggedNotStored > 0:
		outcome = outcomeFindings
		r.slog.Warn("re-verification found sessions that do not verify", "failed", st.Failed, "sessions", st.Sessions, "logged_not_stored", st.LoggedNotStored)
	}
	bg := context.WithoutCancel(ctx)
	reverifyRuns.Add(bg, 1, metric.WithAttributes(attrOutcome.String(outcome)))
	reverifyDuration.Record(bg, st.Finished.Sub(st.Started).Seconds(), metric.WithAttributes(attrOutcome.String(outcome)))
	if err == nil {
		reverifyFailed.Record(bg, st.Failed)
		reverifySessions.Record(bg, st.Sessions)
	}
}

// eachRecovered is each, with a panic turned into the run's error: a run
// goes on in the background of a server, and a fault in it must end the
// run, not the server.
func (r *Reverifier) eachRecovered(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			r.slog.Error("re-verification panicked", "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("internal error: the run panicked: %v", p)
		}
	}()
	return r.each(ctx)
}

// each counts the sessions, then verifies every session, a page of
// sessions at a time.
func (r *Reverifier) each(ctx context.Context) error {
	// Leaves exist only for committed entries, and entries are never
	// legitimately deleted, so the store holds at least as many entries as
	// the checkpoint read now covers, whenever the run reads them.
	logged, err := r.loggedSize(ctx)
	if err != nil {
		return err
	}
	total, err := r.count(ctx)
	r.mu.Lock()
	r.current.Counting = false
	r.current.Total = total
	r.mu.Unlock()
	if err != nil {
		return err
	}
	f := ledger.SessionFilter{Limit: ledger.MaxPageSize}
	for {
		page, err := r.store.Sessions(ctx, f)
		if err != nil {
			return fmt.Errorf("couldn't list sessions: %w", err)
		}
		for _, s := range page.Sessions {
			rep, err := Verify(ctx, r.store, r.log, s.SessionID, r.opts, r.trust)
			if err != nil {
				return err
			}
			r.mu.Lock()
			st := r.current
			st.Sessions++
			st.Entries += int64(rep.Entries)
			if !rep.Verified() {
				st.Failed++
				if len(st.FailedSessions) < MaxFailedListed {
					st.FailedSessions = append(st.FailedSessions, failedSession(s.SessionID, rep.Findings))
				}
			}
			r.mu.Unlock()
		}
		if page.Next == "" {
			r.mu.Lock()
			if st := r.current; int64(logged) > st.Entries {
				st.LoggedNotStored = int64(logged) - st.Entries
			}
			r.mu.Unlock()
			return nil
		}
		f.Cursor = page.Next
	}
}

// loggedSize is the tree size of the log's latest checkpoint, 0 without a
// log or a checkpoint.
func (r *Reverifier) loggedSize(ctx context.Context) (uint64, error) {
	if r.log == nil {
		return 0, nil
	}
	signed, err := r.log.Checkpoint(ctx)
	if errors.Is(err, tlog.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("couldn't read the latest checkpoint: %w", err)
	}
	size, err := checkpointSize(signed)
	if err != nil {
		return 0, fmt.Errorf("the log's latest checkpoint: %w", err)
	}
	return size, nil
}

// count pages through the sessions without verifying any, so that the
// run's progress has a denominator. It costs one read of the sessions
// table, small beside verifying every entry.
func (r *Reverifier) count(ctx context.Context) (int64, error) {
	var n int64
	f := ledger.SessionFilter{Limit: ledger.MaxPageSize}
	for {
		page, err := r.store.Sessions(ctx, f)
		if err != nil {
			return 0, fmt.Errorf("couldn't count sessions: %w", err)
		}
		n += int64(len(page.Sessions))
		if page.Next == "" {
			return n, nil
		}
		f.Cursor = page.Next
	}
}

// failedSession keeps what the run saw of a failing session: its codes and
// its first findings, copied so that the rest of the report is not held.
func failedSession(id string, fs []verify.Finding) FailedSession {
	return FailedSession{
		SessionID:     id,
		Codes:         codes(fs),
		Findings:      slices.Clone(fs[:min(len(fs), MaxFindingsPerSession)]),
		FindingsTotal: len(fs),
	}
}

// codes lists the distinct finding codes, first seen first.
func codes(fs []verify.Finding) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range fs {
		if !seen[f.Code] {
			seen[f.Code] = true
			out = append(out, f.Code)
		}
	}
	return out
}
