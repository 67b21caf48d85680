// Package whatif runs a candidate policy over recorded history
// (docs/whatif.md): every recorded step a filter selects, in the order the
// ledger recorded it, is evaluated again under the candidate, and the run
// reports which decisions would change, how, and which rules fire
// differently. It answers "if we ship this rule, what would it have
// denied?" and, from one decision, "would this policy have stopped it?".
//
// A Guardian step's policy input is rebuilt exactly as replay rebuilds it
// (guardian/replay.History, opapolicy.BuildInput: the live decision's own
// builder), and evaluated with the recorded non-deterministic built-in
// results, so that only the policy differs. An ingested OPA decision is
// evaluated at its recorded path on its recorded input. What cannot be
// evaluated honestly is never guessed: steps whose params or input were
// erased, expired or masked are counted as not replayable with the
// reason, and steps whose recorded evaluator differs, or whose input the
// ledger holds only approximately, are evaluated and marked approximate.
//
// A run reads the ledger a page at a time and keeps per-session state for
// a bounded number of sessions, so its memory does not grow with the
// number of steps.
package whatif

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown/builtins"
	"github.com/open-policy-agent/opa/v1/version"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/guardian/policy"
	"github.com/acsledger/acsledger/guardian/replay"
	"github.com/acsledger/acsledger/ledger"
)

// Store is what a run reads: the recorded steps a filter selects, a page
// at a time (ledger.RecordedStepReader), and, for a Guardian step whose
// session's earlier entries the filter left out, those entries and their
// params (ledger.Store.Entries and ledger.StepReader.Request, with their
// contracts: ErrNotFound, and ErrErased for erased params), and, for an
// ingested OPA decision, the source record kept beside its entry
// (ledger.SourceReader: ErrErased once erased or expired).
type Store interface {
	ledger.RecordedStepReader
	replay.StepHistoryReader
	ledger.SourceReader
}

// Limits of a run.
const (
	// DefaultMaxSteps caps the steps one run evaluates.
	DefaultMaxSteps = 10_000_000
	// maxSessions bounds the sessions whose state a run keeps; a session
	// evicted and met again is rebuilt from the ledger.
	maxSessions = 4096
	// maxListed bounds the not-replayable steps a report lists one by
	// one (all are counted).
	maxListed = 100
	pageSize  = ledger.MaxPageSize
	// paceSlice is how long a run with a Share works between rests.
	paceSlice = 5 * time.Millisecond
)

// ErrBadRun is wrapped by a refused run: a bad filter, or a limit over
// the cap. The message names the flag.
var ErrBadRun = errors.New("bad what-if run")

// Options are a run's filter and bounds.
type Options struct {
	// Filter selects the steps; its After and Limit are the run's own.
	Filter ledger.StepFilter
	// Limit evaluates at most this many steps; 0 means MaxSteps. More
	// than MaxSteps is refused.
	Limit int64
	// MaxSteps is the cap on Limit; 0 means DefaultMaxSteps.
	MaxSteps int64
	// Progress, when set, is called after every page with the counts so
	// far.
	Progress func(Progress)
	// Share, between 0 and 1, is the part of the wall time the run may
	// work: after every few milliseconds of work it rests in proportion
	// (0.25 works one millisecond in four), so that a server's live
	// decisions keep the CPU. 0 means no rest.
	Share float64
	// Focus names one step (incident mode): the summary's Focus holds
	// its comparison whether or not its decision changed.
	Focus *ledger.StepRef
}

// Progress is how far a run is.
type Progress struct {
	Read          int64 `json:"read"`
	Evaluated     int64 `json:"evaluated"`
	Changed       int64 `json:"changed"`
	NotReplayable int64 `json:"not_replayable"`
	// At is the recorded time of the last step read.
	At time.Time `json:"at"`
}

// Side is one side of a comparison: the recorded decision or the
// candidate's.
type Side struct {
	Decision    string   `json:"decision"`
	Rules       []string `json:"rules"`
	ReasonCodes []string `json:"reason_codes,omitempty"`
	Reasoning   string   `json:"reasoning,omitempty"`
	// Result is an OPA decision's result (absent when undefined).
	Result json.RawMessage `json:"result,omitempty"`
}

// Change is one step whose decision the candidate would change.
type Change struct {
	// Type is "change".
	Type       string    `json:"type"`
	Seq        int64     `json:"seq"`
	SessionID  string    `json:"session_id"`
	Position   int64     `json:"position"`
	StepID     string    `json:"step_id"`
	AgentID    string    `json:"agent_id"`
	Method     string    `json:"method"`
	Tool       string    `json:"tool,omitempty"`
	Source     string    `json:"source"`
	RecordedAt time.Time `json:"recorded_at"`
	// Kind is "<recorded>-><candidate>" (allow->deny, ...).
	Kind      string `json:"kind"`
	Recorded  Side   `json:"recorded"`
	Candidate Side   `json:"candidate"`
	// Approximate names why the comparison may not be exact.
	Approximate []string `json:"approximate,omitempty"`
}

// Skip is a step the run could not evaluate, with the reason.
type Skip struct {
	SessionID string `json:"session_id"`
	Position  int64  `json:"position"`
	StepID    string `json:"step_id"`
	Reason    string `json:"reason"`
}

// RuleDelta is a rule that fires differently: on how many evaluated steps
// it fired only in the recorded decision (Lost) or only in the
// candidate's (Gained).
type RuleDelta struct {
	Rule   string `json:"rule"`
	Gained int64  `json:"gained"`
	Lost   int64  `json:"lost"`
}

// DayCount is the changed decisions of one UTC day.
type DayCount struct {
	Day     string `json:"day"`
	Changed int64  `json:"changed"`
}

// Summary is a run's report.
type Summary struct {
	// Type is "summary", telling it from the changes in a JSON stream.
	Type            string `json:"type"`
	Candidate       string `json:"candidate"` // "id@version"
	CandidateDigest string `json:"candidate_digest"`
	Evaluator       string `json:"evaluator"`
	// Read counts the steps the filter selected and the run read;
	// Evaluated those evaluated under the candidate, Unchanged and
	// Changed split them (a change is a different decision).
	Read      int64 `json:"read"`
	Evaluated int64 `json:"evaluated"`
	Unchanged int64 `json:"unchanged"`
	Changed   int64 `json:"changed"`
	// ByKind counts the changes by kind ("allow->deny": n).
	ByKind map[string]int64 `json:"by_kind"`
	// RulesOnly counts evaluated steps whose decision is the same but
	// whose rules differ.
	RulesOnly int64       `json:"rules_only"`
	Rules     []RuleDelta `json:"rules"`
	// NotPolicy counts steps that are not policy decisions (approvals,
	// Intent extensions, the Guardian's own refusals, records of other
	// tools).
	NotPolicy int64 `json:"not_policy_decisions"`
	// NotReplayable counts steps that cannot be evaluated honestly, by
	// reason class; NotReplayableSteps lists the first of them.
	NotReplayable       int64            `json:"not_replayable"`
	NotReplayableByKind map[string]int64 `json:"not_replayable_by_reason"`
	NotReplayableSteps  []Skip           `json:"not_replayable_steps"`
	// Approximate counts evaluated steps whose comparison may not be
	// exact, by reason class.
	Approximate       int64            `json:"approximate"`
	ApproximateByKind map[string]int64 `json:"approximate_by_reason"`
	// ChangedByDay is the changes per UTC day of their recording.
	ChangedByDay []DayCount `json:"changed_by_day"`
	// Focus is the comparison of Options.Focus's step (Kind
	// "unchanged" when the decision is the same); nil when the run did
	// not meet it or could not evaluate it.
	Focus *Change `json:"focus,omitempty"`
	// Truncated is true when the run stopped at its limit with steps
	// left.
	Truncated bool          `json:"truncated"`
	Elapsed   time.Duration `json:"elapsed_ns"`
}

// Run evaluates c on the steps opts selects, in recorded order, calls
// emit with each change as it is found (an emit error stops the run), and
// returns the summary. It returns the context's error when ctx ends
// first, and an ErrBadRun for a refused filter or limit.
func Run(ctx context.Context, store Store, c *Candidate, opts Options, emit func(Change) error) (*Summary, error) {
	start := time.Now()
	if err := Validate(c, opts); err != nil {
		return nil, err
	}
	limit := opts.Limit
	if limit == 0 {
		limit = opts.MaxSteps
		if limit <= 0 {
			limit = DefaultMaxSteps
		}
	}
	f := opts.Filter
	f.After, f.Limit = 0, pageSize
	r := &runner{
		store: store, c: c, emit: emit,
		sessions: map[string]*replay.History{},
		byDay:    map[string]int64{},
		rules:    map[string]*RuleDelta{},
		sum: Summary{
			Type: "summary", Candidate: c.Bundle.ID + "@" + c.Bundle.Version, CandidateDigest: c.Digest, Evaluator: policy.EvaluatorVersion(),
			ByKind: map[string]int64{}, NotReplayableByKind: map[string]int64{}, ApproximateByKind: map[string]int64{},
			NotReplayableSteps: []Skip{}, Rules: []RuleDelta{}, ChangedByDay: []DayCount{},
		},
	}
	// The next page is read while this one is evaluated: the ledger's
	// reads and the policy's evaluation overlap, two pages in memory at
	// most.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pages := make(chan stepPage, 1)
	go readPages(ctx, store, f, limit, pages)
	var at time.Time
	r.focus = opts.Focus
	worked := time.Now()
	for p := range pages {
		if p.err != nil {
			if errors.Is(p.err, ledger.ErrInvalidSearch) {
				return nil, fmt.Errorf("%w: %w", ErrBadRun, p.err)
			}
			return nil, p.err
		}
		for i := range p.steps {
			if r.sum.Read >= limit {
				r.sum.Truncated = true
				break
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			st := &p.steps[i]
			r.sum.Read++
			if err := r.step(ctx, st); err != nil {
				return nil, err
			}
			if r.emitErr != nil {
				return nil, r.emitErr
			}
			at = st.Entry.RecordedAt
			if opts.Share > 0 && opts.Share < 1 {
				// Rest in slices of a few milliseconds, so that live work
				// never waits long behind the run.
				if w := time.Since(worked); w >= paceSlice {
					rest := time.Duration(float64(w) * (1 - opts.Share) / opts.Share)
					select {
					case <-time.After(rest):
					case <-ctx.Done():
					}
					worked = time.Now()
				}
			}
		}
		if opts.Progress != nil {
			opts.Progress(Progress{Read: r.sum.Read, Evaluated: r.sum.Evaluated, Changed: r.sum.Changed, NotReplayable: r.sum.NotReplayable, At: at})
		}
		if r.sum.Truncated {
			break
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.finish()
	r.sum.Elapsed = time.Since(start)
	return &r.sum, nil
}

// Validate refuses a run before any step is evaluated: a limit that is
// negative or over the cap, an unknown filter value, an inverted time
// range, or a candidate without the Guardian's decision rule over more
// than ingested OPA decisions. The message names the flag.
func Validate(c *Candidate, opts Options) error {
	maxSteps := opts.MaxSteps
	if maxSteps <= 0 {
		maxSteps = DefaultMaxSteps
	}
	switch {
	case opts.Limit < 0:
		return fmt.Errorf("%w: --limit %d is negative", ErrBadRun, opts.Limit)
	case opts.Limit > maxSteps:
		return fmt.Errorf("%w: --limit %d is over the cap of %d steps per run", ErrBadRun, opts.Limit, maxSteps)
	}
	f := opts.Filter
	if err := checkFilter(f); err != nil {
		return err
	}
	if err := f.Check(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadRun, err)
	}
	if !c.Guardian && f.Source != "opa" {
		return fmt.Errorf("%w: the candidate has no %s rule, so it can only be run with --source opa", ErrBadRun, policy.DecisionRule)
	}
	return nil
}

// Decisions and Sources are the values the --decision and --source
// filters take.
var (
	Decisions = []string{"allow", "deny", "modify", "ask", "defer"}
	Sources   = []string{"guardian", "opa", "bash-guard", "bash-guard-audit", "a2h", "acs"}
)

// checkFilter refuses unknown filter values and an inverted time range,
// naming the flag.
func checkFilter(f ledger.StepFilter) error {
	if f.Disposition != "" && !slices.Contains(Decisions, f.Disposition) {
		return fmt.Errorf("%w: --decision %q is not one of %s", ErrBadRun, f.Disposition, strings.Join(Decisions, ", "))
	}
	if f.Source != "" && !slices.Contains(Sources, f.Source) {
		return fmt.Errorf("%w: --source %q is not one of %s", ErrBadRun, f.Source, strings.Join(Sources, ", "))
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return fmt.Errorf("%w: --until %s does not come after --since %s", ErrBadRun, f.Until.Format(time.RFC3339), f.Since.Format(time.RFC3339))
	}
	return nil
}

// stepPage is one page of recorded steps, or the error reading it.
type stepPage struct {
	steps []ledger.RecordedStep
	err   error
}

// readPages sends the pages of steps f selects to pages, one more than
// limit steps at most (so the run can tell it stopped with steps left),
// and closes it after the last page, an error, or when ctx ends.
func readPages(ctx context.Context, store Store, f ledger.StepFilter, limit int64, pages chan<- stepPage) {
	defer close(pages)
	var read int64
	for read <= limit {
		page, err := store.RecordedSteps(ctx, f)
		select {
		case pages <- stepPage{page, err}:
		case <-ctx.Done():
			return
		}
		if err != nil || len(page) < f.Limit {
			return
		}
		read += int64(len(page))
		f.After = page[len(page)-1].Seq
	}
}

type runner struct {
	store    Store
	c        *Candidate
	emit     func(Change) error
	sessions map[string]*replay.History
	byDay    map[string]int64
	rules    map[string]*RuleDelta
	sum      Summary
	// emitErr is the first error emit returned; it stops the run.
	emitErr error
	focus   *ledger.StepRef
}

// step evaluates one recorded step.
func (r *runner) step(ctx context.Context, st *ledger.RecordedStep) error {
	switch {
	case st.Source == "guardian":
		return r.guardianStep(ctx, st)
	case st.Source == "opa" && st.Entry.StepType == "ingest/opa/decision":
		return r.opaStep(ctx, st)
	}
	r.sum.NotPolicy++
	return nil
}

// history returns the session's History caught up to the step's position.
func (r *runner) history(ctx context.Context, e ledger.Entry) (*replay.History, error) {
	h := r.sessions[e.SessionID]
	if h == nil || h.Next > e.Position {
		if len(r.sessions) >= maxSessions {
			for k := range r.sessions {
				delete(r.sessions, k)
				break
			}
		}
		h = replay.NewHistory(e.SessionID)
		r.sessions[e.SessionID] = h
	}
	if err := h.CatchUp(ctx, r.store, e.Position); err != nil {
		return nil, err
	}
	return h, nil
}

func (r *runner) guardianStep(ctx context.Context, st *ledger.RecordedStep) error {
	e := st.Entry
	h, err := r.history(ctx, e)
	if err != nil {
		return err
	}
	// Whatever happens to this step, the session's later steps see it.
	defer func() {
		// Params that do not match their entry leave the later steps'
		// provenance incomplete (Add notes it); this step is already
		// counted not replayable.
		_ = h.Add(e, st.Params)
	}()
	if !r.c.Guardian {
		r.sum.NotPolicy++
		return nil
	}
	if st.Params == nil {
		var e0 struct {
			Decision struct {
				PolicyReferences []acs.PolicyReference `json:"policy_references"`
			} `json:"decision"`
			RequestHash string `json:"request_hash"`
		}
		_ = json.Unmarshal(e.Content, &e0)
		switch {
		case len(e0.Decision.PolicyReferences) == 0 || e0.RequestHash == "":
			r.sum.NotPolicy++
		case st.Erased != nil:
			r.notReplayable(st, "params_erased", fmt.Sprintf("the params were erased at %s (%s)", st.Erased.ErasedAt.Format(time.RFC3339), st.Erased.Reason))
		default:
			r.notReplayable(st, "params_missing", "the ledger holds no params for this step")
		}
		return nil
	}
	rec, err := h.Recorded(e, st.Params, st.Response)
	switch {
	case errors.Is(err, replay.ErrNotPolicyDecision):
		r.sum.NotPolicy++
		return nil
	case errors.Is(err, replay.ErrStoredParamsMismatch), errors.Is(err, replay.ErrBadRequest):
		r.notReplayable(st, "params_mismatch", err.Error())
		return nil
	case err != nil:
		return err
	}
	var approx []string
	for _, n := range rec.NotReconstructed {
		approx = append(approx, n)
		r.approximate(reasonClass(n))
	}
	if rec.EvaluatorVersion != "" {
		if engine, _, _ := strings.Cut(rec.EvaluatorVersion, " "); engine != policy.EvaluatorVersion() {
			approx = append(approx, fmt.Sprintf("evaluator: recorded by %s, evaluated by %s", engine, policy.EvaluatorVersion()))
			r.approximate("evaluator_version")
		}
	}
	cand := Side{}
	d, err := r.c.guardian.Replay(ctx, rec.Input, rec.NDCache)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The live Guardian answers a failing policy with a refusal
		// (ACS §6.4); the candidate's failure is reported as such.
		cand = Side{Decision: "policy_error", Rules: []string{}, Reasoning: err.Error()}
	} else {
		cand = sideOf(d)
	}
	r.compare(st, e.StepType, sideOf(rec.Decision), cand, approx)
	return nil
}

// sideOf is a Guardian decision as one side of a comparison.
func sideOf(d *policy.Decision) Side {
	s := Side{Decision: string(d.Disposition), Rules: []string{}, ReasonCodes: d.ReasonCodes, Reasoning: d.Reasoning}
	for _, ref := range d.PolicyReferences {
		if ref.RuleID != "" {
			s.Rules = append(s.Rules, ref.RuleID)
		}
	}
	slices.Sort(s.Rules)
	s.Rules = slices.Compact(s.Rules)
	return s
}

// opaEntry is what a run reads of an ingested OPA decision's entry
// (ingest/opa.go).
type opaEntry struct {
	Decision struct {
		Path           string          `json:"path"`
		Query          string          `json:"query"`
		Result         json.RawMessage `json:"result"`
		Erased         []string        `json:"erased"`
		Masked         []string        `json:"masked"`
		NDBuiltinCache string          `json:"nd_builtin_cache"`
		Labels         struct {
			Version string `json:"version"`
		} `json:"labels"`
	} `json:"decision"`
	SourceRecord *string `json:"source_record"`
}

func (r *runner) opaStep(ctx context.Context, st *ledger.RecordedStep) error {
	var oe opaEntry
	if err := json.Unmarshal(st.Entry.Content, &oe); err != nil {
		r.notReplayable(st, "unreadable", fmt.Sprintf("the entry is not an OPA decision: %v", err))
		return nil
	}
	d := oe.Decision
	switch {
	case d.Path == "":
		r.notReplayable(st, "no_path", "the decision has no path (an ad-hoc query), so there is no rule to evaluate")
		return nil
	case len(d.Erased) > 0:
		r.notReplayable(st, "input_erased", "OPA erased "+strings.Join(d.Erased, ", ")+" from the decision log")
		return nil
	case len(d.Masked) > 0:
		r.notReplayable(st, "input_masked", "OPA masked "+strings.Join(d.Masked, ", ")+" in the decision log")
		return nil
	}
	src, reason, why, err := r.opaSource(ctx, st, oe.SourceRecord)
	if err != nil {
		return err
	}
	if src == nil {
		r.notReplayable(st, reason, why)
		return nil
	}
	var ev struct {
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(src, &ev); err != nil || len(ev.Input) == 0 {
		r.notReplayable(st, "input_missing", "the decision's input was not recorded")
		return nil
	}
	var approx []string
	if v := d.Labels.Version; v != "" && v != version.Version {
		approx = append(approx, fmt.Sprintf("evaluator: recorded by OPA %s, evaluated by OPA %s", v, version.Version))
		r.approximate("evaluator_version")
	}
	q, err := r.c.query(ctx, d.Path)
	if err != nil {
		r.notReplayable(st, "path", err.Error())
		return nil
	}
	input, err := ast.ValueFromReader(bytes.NewReader(ev.Input))
	if err != nil {
		r.notReplayable(st, "input_unreadable", fmt.Sprintf("the recorded input is not JSON OPA reads: %v", err))
		return nil
	}
	evalOpts := []rego.EvalOption{rego.EvalParsedInput(input)}
	if d.NDBuiltinCache != "" {
		var cache builtins.NDBCache
		if err := json.Unmarshal([]byte(d.NDBuiltinCache), &cache); err == nil {
			evalOpts = append(evalOpts, rego.EvalNDBuiltinCache(cache))
		} else {
			approx = append(approx, "nd_builtin_cache (unreadable; evaluated without it)")
			r.approximate("nd_builtin_cache")
		}
	}
	rec := opaSide(d.Result)
	var cand Side
	rs, err := q.Eval(ctx, evalOpts...)
	switch {
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		cand = Side{Decision: "policy_error", Rules: []string{}, Reasoning: err.Error()}
	case len(rs) == 0 || len(rs[0].Expressions) == 0:
		cand = opaSide(nil)
	default:
		raw, err := json.Marshal(rs[0].Expressions[0].Value)
		if err != nil {
			return fmt.Errorf("couldn't encode the candidate's result: %w", err)
		}
		cand = opaSide(raw)
	}
	if cand.Decision == rec.Decision && cand.Decision != "policy_error" && !sameJSON(rec.Result, cand.Result) {
		// Same verdict, another value: still a change, of the result.
		cand.Decision += " (result changed)"
	}
	r.compare(st, st.Entry.StepType, rec, cand, approx)
	return nil
}

// opaSource returns an ingested OPA decision's source record: inline in
// entries ingested before sources were kept apart (inline), else the one
// stored beside the entry. Without one it returns nil and why, as a
// not-replayable reason; err is only a failure of the store.
func (r *runner) opaSource(ctx context.Context, st *ledger.RecordedStep, inline *string) (src []byte, reason, why string, err error) {
	if inline != nil {
		return []byte(*inline), "", "", nil
	}
	src, err = r.store.Source(ctx, st.Entry.SessionID, st.Entry.Position)
	var erased *ledger.ErasedError
	switch {
	case errors.As(err, &erased):
		return nil, "input_erased", fmt.Sprintf("the source record was erased on %s: %s",
			erased.Erasure.ErasedAt.UTC().Format(time.RFC3339), erased.Erasure.Reason), nil
	case errors.Is(err, ledger.ErrNotFound):
		return nil, "input_missing", "the ledger holds no source record for this decision", nil
	case err != nil:
		return nil, "", "", fmt.Errorf("couldn't read the source record of %s/%d: %w", st.Entry.SessionID, st.Entry.Position, err)
	}
	return src, "", "", nil
}

// opaSide reads an OPA result as a verdict: true/false, or an object's
// allow member, are allow/deny; an object's decision member is itself;
// no result is "undefined"; anything else is "value".
func opaSide(raw json.RawMessage) Side {
	s := Side{Rules: []string{}, Result: raw}
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		s.Decision = "undefined"
		return s
	}
	switch x := v.(type) {
	case bool:
		s.Decision = map[bool]string{true: "allow", false: "deny"}[x]
	case map[string]any:
		if a, ok := x["allow"].(bool); ok {
			s.Decision = map[bool]string{true: "allow", false: "deny"}[a]
		} else if d, ok := x["decision"].(string); ok {
			s.Decision = d
		} else {
			s.Decision = "value"
		}
	default:
		s.Decision = "value"
	}
	return s
}

func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	ca, err1 := acs.Canonicalize(a)
	cb, err2 := acs.Canonicalize(b)
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}

// compare counts one evaluated step and emits it when its decision
// changed.
func (r *runner) compare(st *ledger.RecordedStep, method string, rec, cand Side, approx []string) {
	r.sum.Evaluated++
	if len(approx) > 0 {
		r.sum.Approximate++
	}
	rulesDiffer := !slices.Equal(rec.Rules, cand.Rules)
	if rulesDiffer {
		for _, x := range rec.Rules {
			if !slices.Contains(cand.Rules, x) {
				r.rule(x).Lost++
			}
		}
		for _, x := range cand.Rules {
			if !slices.Contains(rec.Rules, x) {
				r.rule(x).Gained++
			}
		}
	}
	ch := Change{
		Type: "change", Seq: st.Seq, SessionID: st.Entry.SessionID, Position: st.Entry.Position, StepID: st.Entry.StepID,
		AgentID: st.AgentID, Method: method, Tool: st.ToolName, Source: st.Source, RecordedAt: st.Entry.RecordedAt,
		Kind: rec.Decision + "->" + cand.Decision, Recorded: rec, Candidate: cand, Approximate: approx,
	}
	if f := r.focus; f != nil && f.SessionID == st.Entry.SessionID && f.Position == st.Entry.Position {
		focus := ch
		if rec.Decision == cand.Decision {
			focus.Kind = "unchanged"
		}
		r.sum.Focus = &focus
	}
	if rec.Decision == cand.Decision {
		r.sum.Unchanged++
		if rulesDiffer {
			r.sum.RulesOnly++
		}
		return
	}
	r.sum.Changed++
	r.sum.ByKind[ch.Kind]++
	r.byDay[st.Entry.RecordedAt.UTC().Format(time.DateOnly)]++
	if r.emit == nil {
		return
	}
	if err := r.emit(ch); err != nil {
		r.emitErr = err
	}
}

func (r *runner) rule(id string) *RuleDelta {
	d := r.rules[id]
	if d == nil {
		d = &RuleDelta{Rule: id}
		r.rules[id] = d
	}
	return d
}

func (r *runner) notReplayable(st *ledger.RecordedStep, class, reason string) {
	r.sum.NotReplayable++
	r.sum.NotReplayableByKind[class]++
	if len(r.sum.NotReplayableSteps) < maxListed {
		r.sum.NotReplayableSteps = append(r.sum.NotReplayableSteps, Skip{
			SessionID: st.Entry.SessionID, Position: st.Entry.Position, StepID: st.Entry.StepID, Reason: reason,
		})
	}
}

func (r *runner) approximate(class string) { r.sum.ApproximateByKind[class]++ }

// reasonClass is the class of a replay.Recorded.NotReconstructed note: its
// first word ("provenance", "session.deferrals", "nd_builtin_cache").
func reasonClass(note string) string {
	class, _, _ := strings.Cut(note, " ")
	return class
}

// finish orders the summary's lists.
func (r *runner) finish() {
	for _, d := range r.rules {
		r.sum.Rules = append(r.sum.Rules, *d)
	}
	sort.Slice(r.sum.Rules, func(i, j int) bool {
		a, b := r.sum.Rules[i], r.sum.Rules[j]
		if a.Gained+a.Lost != b.Gained+b.Lost {
			return a.Gained+a.Lost > b.Gained+b.Lost
		}
		return a.Rule < b.Rule
	})
	for day, n := range r.byDay {
		r.sum.ChangedByDay = append(r.sum.ChangedByDay, DayCount{Day: day, Changed: n})
	}
	sort.Slice(r.sum.ChangedByDay, func(i, j int) bool { return r.sum.ChangedByDay[i].Day < r.sum.ChangedByDay[j].Day })
}
