// Package retention applies retention rules, legal holds and erasure
// requests to the payloads stored beside the ledger's entries
// (docs/retention.md): a sweep erases, in bounded batches, the payloads
// whose entries are older than a rule's period, never those a standing
// hold covers, and never an entry, head, response or Merkle leaf. Every
// sweep, every change of a rule, every hold set or released and every
// erasure request is itself a chained ContextEntry in the admin session
// of its day, anchored in the Merkle log like any other entry.
package retention

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
)

// AgentID is the agent id of the admin sessions that record retention.
const AgentID = "acsledger-admin"

// SessionID is the admin session of the day of t (UTC).
func SessionID(t time.Time) string { return AgentID + "-" + t.UTC().Format(time.DateOnly) }

// The step types of the admin session's entries. They answer no ACS
// request, so no signed response publishes their head.
const (
	StepSweep       = "acsledger/retention-sweep"
	StepErasure     = "acsledger/erasure-request"
	StepRuleSet     = "acsledger/retention-rule-set"
	StepRuleDelete  = "acsledger/retention-rule-delete"
	StepHoldSet     = "acsledger/legal-hold-set"
	StepHoldRelease = "acsledger/legal-hold-release"
)

// Store is what the service calls: the rules and holds, the batched
// erasure and its runs, and Append for the admin session.
type Store interface {
	PutRule(ctx context.Context, r ledger.Rule) (ledger.Rule, error)
	DeleteRule(ctx context.Context, name string) (ledger.Rule, error)
	Rules(ctx context.Context) ([]ledger.Rule, error)
	PutHold(ctx context.Context, h ledger.Hold) (ledger.Hold, error)
	ReleaseHold(ctx context.Context, caseName, by, reason string) (ledger.Hold, error)
	ledger.PayloadSweeper
	Append(ctx context.Context, r ledger.Record) (ledger.Appended, error)
}

// Options tune a Service; the zero value is usable.
type Options struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Batch is the most payloads one erasing transaction reads
	// (DefaultBatch when 0).
	Batch int
	// Pause is slept between two batches of a run, leaving the database
	// to the Guardian's appends.
	Pause time.Duration
	// Duty, in (0, 1), caps the share of the time a run spends in its
	// erasing transactions: after a batch that took d it also sleeps
	// d*(1-Duty)/Duty. 0 (or 1) means no cap. The embedded store has one
	// writer, so a sweep there takes its turn with the Guardian's appends:
	// a duty of 0.05 keeps them within 10% (docs/retention.md).
	Duty float64
	// Log receives one line per run; nil discards.
	Log *slog.Logger
}

// DefaultBatch keeps an erasing transaction well under a second on both
// stores (docs/retention.md, "Bounded batches").
const DefaultBatch = 200

// EmbeddedDuty is the duty (Options.Duty) serve gives a sweep on the
// embedded store, whose one writer the sweep shares with the Guardian.
const EmbeddedDuty = 0.05

// PostgresDuty is the duty serve gives a sweep on PostgreSQL: the sweep's
// transactions take no lock the Guardian waits for, but they take CPU
// (the erasing process's and PostgreSQL's) that a Guardian on the same
// cores would have used; uncapped, a sweep on a quiet 2-core box took the
// Guardian to 0.55 of its rate, at 0.1 to 0.91 (docs/retention.md).
const PostgresDuty = 0.1

// MaxSessionsPerEntry caps the sessions one record entry lists; a run
// covering more is recorded in parts.
const MaxSessionsPerEntry = 1000

// Service applies retention over a store.
type Service struct {
	store Store
	opts  Options
	next  atomic.Int64 // Every's next sweep, Unix nanoseconds; 0: none
}

// New returns a Service over store.
func New(store Store, opts Options) *Service {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Batch <= 0 {
		opts.Batch = DefaultBatch
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Service{store: store, opts: opts}
}

// RuleJSON is a rule as the API, the CLI and the admin session show it.
type RuleJSON struct {
	Name   string    `json:"name"`
	Scope  RuleScope `json:"scope"`
	Period string    `json:"period"`
	Reason string    `json:"reason"`
	SetBy  string    `json:"set_by,omitempty"`
	SetAt  string    `json:"set_at,omitempty"`
}

// RuleScope is a rule's scope; "" matches anything.
type RuleScope struct {
	AgentPrefix  string `json:"agent_prefix,omitempty"`
	SourceFormat string `json:"source_format,omitempty"`
	StepType     string `json:"step_type,omitempty"`
}

// NewRuleJSON is r's JSON form.
func NewRuleJSON(r ledger.Rule) RuleJSON {
	j := RuleJSON{Name: r.Name, Scope: RuleScope{r.AgentPrefix, r.SourceFormat, r.StepType},
		Period: FormatPeriod(r.Period), Reason: r.Reason, SetBy: r.SetBy}
	if !r.SetAt.IsZero() {
		j.SetAt = stamp(r.SetAt)
	}
	return j
}

// HoldJSON is a hold as the API, the CLI and the admin session show it.
type HoldJSON struct {
	Case          string    `json:"case"`
	Scope         HoldScope `json:"scope"`
	Reason        string    `json:"reason"`
	SetBy         string    `json:"set_by,omitempty"`
	SetAt         string    `json:"set_at,omitempty"`
	ReleasedAt    string    `json:"released_at,omitempty"`
	ReleasedBy    string    `json:"released_by,omitempty"`
	ReleaseReason string    `json:"release_reason,omitempty"`
}

// HoldScope is a hold's scope: every member given must match.
type HoldScope struct {
	Sessions    []string `json:"sessions,omitempty"`
	AgentPrefix string   `json:"agent_prefix,omitempty"`
	From        string   `json:"from,omitempty"`
	Until       string   `json:"until,omitempty"`
}

// NewHoldJSON is h's JSON form.
func NewHoldJSON(h ledger.Hold) HoldJSON {
	j := HoldJSON{Case: h.Case, Scope: HoldScope{Sessions: h.Sessions, AgentPrefix: h.AgentPrefix},
		Reason: h.Reason, SetBy: h.SetBy, ReleasedBy: h.ReleasedBy, ReleaseReason: h.ReleaseReason}
	for _, t := range []struct {
		v   time.Time
		out *string
	}{{h.From, &j.Scope.From}, {h.Until, &j.Scope.Until}, {h.SetAt, &j.SetAt}, {h.ReleasedAt, &j.ReleasedAt}} {
		if !t.v.IsZero() {
			*t.out = stamp(t.v)
		}
	}
	return j
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// ParsePeriod reads a retention period: Go durations ("36h") and whole
// days, weeks, months of 30 days or years of 365 days ("180d", "6mo",
// "1y").
func ParsePeriod(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	for _, u := range []struct {
		suffix string
		d      time.Duration
	}{{"mo", 30 * 24 * time.Hour}, {"d", 24 * time.Hour}, {"w", 7 * 24 * time.Hour}, {"y", 365 * 24 * time.Hour}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			var v int64
			if _, err := fmt.Sscanf(n, "%d", &v); err != nil || fmt.Sprint(v) != n || v < 0 || v > 100*365 {
				return 0, &ledger.InvalidRetentionError{Field: "period", Msg: fmt.Sprintf("%q is not a whole number of %s", s, u.suffix)}
			}
			return time.Duration(v) * u.d, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, &ledger.InvalidRetentionError{Field: "period", Msg: fmt.Sprintf("%q is not a period (e.g. 180d, 6mo, 1y, 36h)", s)}
	}
	return d, nil
}

// FormatPeriod writes a period in whole days when it is some.
func FormatPeriod(d time.Duration) string {
	if d%(24*time.Hour) == 0 && d > 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

// SetRule stores a rule (replacing the one of its name) and records it.
func (s *Service) SetRule(ctx context.Context, r ledger.Rule) (ledger.Rule, error) {
	r, err := s.store.PutRule(ctx, r)
	if err != nil {
		return ledger.Rule{}, err
	}
	return r, s.record(ctx, acs.NewUUID(), StepRuleSet, "rule", NewRuleJSON(r))
}

// DeleteRule deletes a rule and records who deleted it.
func (s *Service) DeleteRule(ctx context.Context, name, by string) (ledger.Rule, error) {
	r, err := s.store.DeleteRule(ctx, name)
	if err != nil {
		return ledger.Rule{}, err
	}
	return r, s.record(ctx, acs.NewUUID(), StepRuleDelete, "rule", struct {
		RuleJSON
		DeletedBy string `json:"deleted_by,omitempty"`
	}{NewRuleJSON(r), by})
}

// SetHold sets a legal hold and records it. The hold stands from the
// moment its row commits, before its record is appended: a hold without
// its record (a crash between the two) is the safe side.
func (s *Service) SetHold(ctx context.Context, h ledger.Hold) (ledger.Hold, error) {
	h, err := s.store.PutHold(ctx, h)
	if err != nil {
		return ledger.Hold{}, err
	}
	return h, s.record(ctx, acs.NewUUID(), StepHoldSet, "hold", NewHoldJSON(h))
}

// ReleaseHold releases a case's standing hold and records it.
func (s *Service) ReleaseHold(ctx context.Context, caseName, by, reason string) (ledger.Hold, error) {
	h, err := s.store.ReleaseHold(ctx, caseName, by, reason)
	if err != nil {
		return ledger.Hold{}, err
	}
	return h, s.record(ctx, acs.NewUUID(), StepHoldRelease, "hold", NewHoldJSON(h))
}

// record appends one entry to the admin session of today. stepID makes
// a retried record of the same thing the same step.
func (s *Service) record(ctx context.Context, stepID, stepType, member string, v any) error {
	now := s.opts.Now().UTC()
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("couldn't encode the %s record: %w", stepType, err)
	}
	b, err := json.Marshal(map[string]any{
		"entry_id":  acs.NewUUID(),
		"step_id":   stepID,
		"step_type": stepType,
		"timestamp": now.Format("2006-01-02T15:04:05.000Z"),
		member:      json.RawMessage(body),
	})
	if err != nil {
		return fmt.Errorf("couldn't encode the %s record: %w", stepType, err)
	}
	// A caller hanging up does not cut the record short.
	_, err = s.store.Append(context.WithoutCancel(ctx), ledger.Record{SessionID: SessionID(now), AgentID: AgentID, Entry: b})
	if err != nil {
		return fmt.Errorf("couldn't record %s in the admin session: %w", stepType, err)
	}
	return nil
}

// Report is what one run erased.
type Report struct {
	RunID     string               `json:"run_id"`
	Kind      string               `json:"kind"`
	Rule      string               `json:"rule,omitempty"`
	Before    string               `json:"before"`
	Erased    int64                `json:"erased"`
	Sessions  []ledger.ErasedRange `json:"sessions"`
	Recovered bool                 `json:"recovered,omitempty"`
}

// runScope is what a run records before it starts (retention_runs.scope)
// and in its record entry.
type runScope struct {
	Rule    *RuleJSON `json:"rule,omitempty"`
	Request *Request  `json:"request,omitempty"`
	Before  string    `json:"before"`
}

// Request is an erasure request by subject: every payload of the agents
// whose id starts with AgentPrefix, of entries recorded before Until.
type Request struct {
	AgentPrefix string `json:"agent_prefix"`
	Until       string `json:"until"`
	Reason      string `json:"reason"`
	By          string `json:"by,omitempty"`
}

// Sweep first records any run a crash cut short, then runs every rule.
// A store that cannot erase (a PostgreSQL login that is no member of the
// eraser role) is refused before anything is recorded: no run, no record.
func (s *Service) Sweep(ctx context.Context) ([]Report, error) {
	if err := s.store.CanErase(ctx); err != nil {
		return nil, fmt.Errorf("couldn't sweep, nothing was recorded: %w", err)
	}
	var out []Report
	rs, err := s.Recover(ctx)
	out = append(out, rs...)
	if err != nil {
		return out, err
	}
	rules, err := s.store.Rules(ctx)
	if err != nil {
		return out, err
	}
	for _, r := range rules {
		rj := NewRuleJSON(r)
		before := s.opts.Now().UTC().Add(-r.Period)
		rep, err := s.run(ctx, "sweep", runScope{Rule: &rj, Before: stamp(before)},
			ledger.PayloadScope{AgentPrefix: r.AgentPrefix, StepType: r.StepType, Before: before}, r.SourceFormat,
			fmt.Sprintf("retention rule %q: older than %s (%s)", r.Name, FormatPeriod(r.Period), r.Reason), "acsledger retention sweep")
		if err != nil {
			return out, fmt.Errorf("couldn't sweep rule %q: %w", r.Name, err)
		}
		rep.Rule = r.Name
		out = append(out, rep)
	}
	return out, nil
}

// Erase carries out an erasure request by subject: every payload in its
// scope, except those under a hold, with one record of the request.
func (s *Service) Erase(ctx context.Context, q Request) (Report, error) {
	if err := CheckRequest(q); err != nil {
		return Report{}, err
	}
	until, _ := time.Parse(time.RFC3339Nano, q.Until)
	q.Until = stamp(until)
	by := q.By
	if by == "" {
		by = "acsledger erase"
	}
	if err := s.store.CanErase(ctx); err != nil {
		return Report{}, fmt.Errorf("couldn't carry out the erasure request, nothing was recorded: %w", err)
	}
	return s.run(ctx, "request", runScope{Request: &q, Before: q.Until},
		ledger.PayloadScope{AgentPrefix: q.AgentPrefix, Before: until}, "",
		fmt.Sprintf("erasure request for agents %q until %s: %s", q.AgentPrefix, q.Until, q.Reason), by)
}

// CheckRequest refuses an erasure request Erase would refuse, naming the
// field.
func CheckRequest(q Request) error {
	switch {
	case q.AgentPrefix == "":
		return &ledger.InvalidRetentionError{Field: "agent_prefix", Msg: "must not be empty (an erasure request names its subject)"}
	case strings.TrimSpace(q.Reason) == "":
		return &ledger.InvalidRetentionError{Field: "reason", Msg: "must not be blank"}
	}
	if _, err := time.Parse(time.RFC3339Nano, q.Until); err != nil {
		return &ledger.InvalidRetentionError{Field: "until", Msg: fmt.Sprintf("%q is not an RFC 3339 time", q.Until)}
	}
	return nil
}

// run erases the payloads of every kind in scope, batch by batch, and
// records the run. A run cut short is found by Recover through its
// retention_runs row.
func (s *Service) run(ctx context.Context, kind string, scope runScope, ps ledger.PayloadScope, format, reason, by string) (Report, error) {
	desc, err := json.Marshal(scope)
	if err != nil {
		return Report{}, err
	}
	run := ledger.Run{ID: acs.NewUUID(), Kind: kind, Scope: string(desc), StartedAt: s.opts.Now().UTC()}
	if err := s.store.StartRun(ctx, run); err != nil {
		return Report{}, err
	}
	start := time.Now()
	for _, k := range ledger.PayloadKinds {
		if !k.HasFormat(format) {
			continue
		}
		ps.SourceFormat = format
		for from := ledger.Start; ; {
			t := time.Now()
			b, err := s.store.EraseBatch(ctx, k.Name, ps, from, s.opts.Batch, run.ID, reason, by)
			if err != nil {
				return Report{}, err
			}
			if b.Done {
				break
			}
			from = b.Next
			if wait := s.wait(time.Since(t)); wait > 0 {
				select {
				case <-ctx.Done():
					return Report{}, ctx.Err()
				case <-time.After(wait):
				}
			}
		}
	}
	rep, err := s.finish(ctx, run, false)
	if err == nil {
		s.opts.Log.Info("retention run", "run", run.ID, "kind", kind, "erased", rep.Erased, "sessions", len(rep.Sessions), "took", time.Since(start).Round(time.Millisecond))
	}
	return rep, err
}

// wait is how long to sleep after a batch that took took.
func (s *Service) wait(took time.Duration) time.Duration {
	w := s.opts.Pause
	if d := s.opts.Duty; d > 0 && d < 1 {
		w += time.Duration(float64(took) * (1 - d) / d)
	}
	return w
}

// Recover records every run a crash cut short, from the erasures it made
// (each payload it erased has its erasures row naming the run).
func (s *Service) Recover(ctx context.Context) ([]Report, error) {
	runs, err := s.store.UnfinishedRuns(ctx)
	if err != nil {
		return nil, err
	}
	var out []Report
	for _, r := range runs {
		rep, err := s.finish(ctx, r, true)
		if err != nil {
			return out, err
		}
		s.opts.Log.Warn("recorded a retention run cut short", "run", r.ID, "kind", r.Kind, "erased", rep.Erased)
		out = append(out, rep)
	}
	return out, nil
}

// finish records a run in the admin session (in parts of at most
// MaxSessionsPerEntry sessions) and marks it finished.
func (s *Service) finish(ctx context.Context, run ledger.Run, recovered bool) (Report, error) {
	var scope runScope
	if err := json.Unmarshal([]byte(run.Scope), &scope); err != nil {
		return Report{}, fmt.Errorf("couldn't read the scope of run %s: %w", run.ID, err)
	}
	ranges, err := s.store.RunErasures(ctx, run.ID)
	if err != nil {
		return Report{}, err
	}
	rep := Report{RunID: run.ID, Kind: run.Kind, Before: scope.Before, Sessions: ranges, Recovered: recovered}
	if scope.Rule != nil {
		rep.Rule = scope.Rule.Name
	}
	for _, r := range ranges {
		rep.Erased += r.Count
	}
	stepType := StepSweep
	if run.Kind == "request" {
		stepType = StepErasure
	}
	parts := max(1, (len(ranges)+MaxSessionsPerEntry-1)/MaxSessionsPerEntry)
	for p := range parts {
		chunk := ranges[min(p*MaxSessionsPerEntry, len(ranges)):min((p+1)*MaxSessionsPerEntry, len(ranges))]
		stepID := run.ID
		if parts > 1 {
			stepID = fmt.Sprintf("%s/%d", run.ID, p+1)
		}
		err := s.record(ctx, stepID, stepType, "retention", struct {
			RunID     string               `json:"run_id"`
			Kind      string               `json:"kind"`
			Scope     runScope             `json:"scope"`
			StartedAt string               `json:"started_at"`
			Erased    int64                `json:"erased"`
			Part      int                  `json:"part"`
			Parts     int                  `json:"parts"`
			Sessions  []ledger.ErasedRange `json:"sessions"`
			Recovered bool                 `json:"recovered,omitempty"`
		}{run.ID, run.Kind, scope, stamp(run.StartedAt), rep.Erased, p + 1, parts, nonNil(chunk), recovered})
		// A record of this part appended before a crash is the same step:
		// the store refuses the second one as a conflict.
		if err != nil && !errors.Is(err, ledger.ErrConflict) {
			return Report{}, err
		}
	}
	if err := s.store.FinishRun(ctx, run.ID, rep.Erased); err != nil {
		return Report{}, err
	}
	return rep, nil
}

func nonNil(r []ledger.ErasedRange) []ledger.ErasedRange {
	if r == nil {
		return []ledger.ErasedRange{}
	}
	return r
}

// Every runs Sweep every interval until ctx ends, logging failures.
func (s *Service) Every(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	defer s.next.Store(0)
	for {
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.opts.Log.Error("retention sweep failed", "err", err)
		}
		s.next.Store(time.Now().Add(interval).UnixNano())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// NextSweep is when Every sweeps next; zero when it is not running.
func (s *Service) NextSweep() time.Time {
	if n := s.next.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}
