package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Retention, legal holds and erasure by subject (docs/retention.md). The
// rules and holds are what an admin sets; the sweeper (ledger/retention)
// erases payloads through PayloadSweeper in bounded batches. Entries,
// heads, responses and the Merkle log are never touched: payloads are
// stored beside the entries that commit to them by hash.

// MinRetention is the shortest period a rule may keep payloads.
const MinRetention = 24 * time.Hour

// ErrHeld is matched by *HeldError: a standing legal hold covers what was
// to be erased.
var ErrHeld = errors.New("under legal hold")

// HeldError refuses an erasure of something a standing hold covers, naming
// the hold's case.
type HeldError struct {
	Case      string
	SessionID string
	Position  int64
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("session %q position %d is under the legal hold of case %q: it cannot be erased until the hold is released", e.SessionID, e.Position, e.Case)
}

func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// InvalidRetentionError is bad input to a rule, a hold or an erasure
// request, naming the field.
type InvalidRetentionError struct {
	Field string
	Msg   string
}

func (e *InvalidRetentionError) Error() string { return e.Field + ": " + e.Msg }

// ErrInvalidRetention is matched by *InvalidRetentionError.
var ErrInvalidRetention = errors.New("invalid retention input")

func (e *InvalidRetentionError) Is(target error) bool { return target == ErrInvalidRetention }

func invalid(field, format string, args ...any) error {
	return &InvalidRetentionError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// PayloadKind is one kind of erasable payload stored beside entries.
// Formats are the source formats a rule's SourceFormat matches for it.
type PayloadKind struct {
	Name    string
	Formats []string
}

// PayloadKinds is every kind of payload the sweeper erases: one row per
// kind (the store holds each kind's queries under the same name).
var PayloadKinds = []PayloadKind{
	// The params of the Guardian's own steps (migration 0003), erased
	// beside an erasures row (0005).
	{Name: "params", Formats: []string{"guardian"}},
	// The source records of ingested entries (0015), erased beside a
	// source_erasures row; the format is the entry's source_format, the
	// ingest formats that keep their source (ingest.Formats less acs,
	// whose records are entries already).
	{Name: "source", Formats: []string{"opa", "bash-guard", "bash-guard-audit", "a2h", "otel-genai"}},
}

// PayloadScope selects payloads to erase: those of entries recorded
// before Before whose agent id starts with AgentPrefix, whose step type
// is StepType and whose source format is SourceFormat ("" for any; the
// kinds with one format ignore it).
type PayloadScope struct {
	AgentPrefix  string
	StepType     string
	SourceFormat string
	Before       time.Time
}

// HasFormat reports whether a rule naming format f (or "" for any) covers
// payloads of kind k.
func (k PayloadKind) HasFormat(f string) bool {
	return f == "" || slices.Contains(k.Formats, f)
}

// Rule is a retention rule: payloads in its scope are erased once their
// entry is older than Period.
type Rule struct {
	Name         string
	AgentPrefix  string
	SourceFormat string
	StepType     string
	Period       time.Duration
	Reason       string
	SetBy        string
	SetAt        time.Time
}

// Check refuses a rule the stores would not keep, naming the field.
func (r Rule) Check() error {
	switch {
	case strings.TrimSpace(r.Name) == "":
		return invalid("name", "must not be blank")
	case r.Period < MinRetention:
		return invalid("period", "%s is less than one day (the shortest period a rule may keep payloads)", r.Period)
	case strings.TrimSpace(r.Reason) == "":
		return invalid("reason", "must not be blank")
	}
	if r.SourceFormat != "" && !knownFormat(r.SourceFormat) {
		return invalid("scope.source_format", "unknown source format %q (known: %s)", r.SourceFormat, strings.Join(formats(), ", "))
	}
	return checkText(map[string]string{"name": r.Name, "reason": r.Reason, "set_by": r.SetBy,
		"scope.agent_prefix": r.AgentPrefix, "scope.step_type": r.StepType})
}

func knownFormat(f string) bool {
	for _, k := range PayloadKinds {
		if slices.Contains(k.Formats, f) {
			return true
		}
	}
	return false
}

func formats() []string {
	var fs []string
	for _, k := range PayloadKinds {
		fs = append(fs, k.Formats...)
	}
	return fs
}

// Hold is a legal hold: while it stands (ReleasedAt zero), nothing in its
// scope is erased, by a sweep or by hand. The scope is every listed
// session, agent prefix and time range given, all at once (an entry is
// held when it matches each one given); at least one is given.
type Hold struct {
	ID          int64
	Case        string
	Sessions    []string
	AgentPrefix string
	// From and Until bound the entries' recorded_at: [From, Until); zero
	// leaves that side open.
	From, Until time.Time
	Reason      string
	SetBy       string
	SetAt       time.Time

	ReleasedAt    time.Time
	ReleasedBy    string
	ReleaseReason string
}

// MaxHoldSessions caps the sessions one hold lists.
const MaxHoldSessions = 10000

// Check refuses a hold the stores would not keep, naming the field.
func (h Hold) Check() error {
	switch {
	case strings.TrimSpace(h.Case) == "":
		return invalid("case", "must not be blank")
	case strings.TrimSpace(h.Reason) == "":
		return invalid("reason", "must not be blank")
	case len(h.Sessions) == 0 && h.AgentPrefix == "" && h.From.IsZero() && h.Until.IsZero():
		return invalid("scope", "give at least one of sessions, agent_prefix, from, until (a hold of everything names no scope)")
	case !h.From.IsZero() && !h.Until.IsZero() && !h.Until.After(h.From):
		return invalid("scope.until", "the time range ends (%s) before it starts (%s)", h.Until.UTC().Format(time.RFC3339), h.From.UTC().Format(time.RFC3339))
	case len(h.Sessions) > MaxHoldSessions:
		return invalid("scope.sessions", "%d sessions, more than %d", len(h.Sessions), MaxHoldSessions)
	}
	for i, s := range h.Sessions {
		if strings.TrimSpace(s) == "" {
			return invalid(fmt.Sprintf("scope.sessions[%d]", i), "empty session id")
		}
	}
	return checkText(map[string]string{"case": h.Case, "reason": h.Reason, "set_by": h.SetBy, "scope.agent_prefix": h.AgentPrefix})
}

func checkText(fields map[string]string) error {
	for name, v := range fields {
		if !utf8.ValidString(v) {
			return invalid(name, "not valid UTF-8")
		}
		if len(v) > MaxErasureText {
			return invalid(name, "%d bytes, more than %d", len(v), MaxErasureText)
		}
	}
	return nil
}

// Cursor is a position in a kind's payloads, in (session, position)
// order; the zero Cursor with Position -1 is before the first.
type Cursor struct {
	SessionID string
	Position  int64
}

// Start is the cursor before every payload.
var Start = Cursor{Position: -1}

// ErasedRange summarises one session's payloads erased by a run.
type ErasedRange struct {
	SessionID string `json:"session_id"`
	Count     int64  `json:"count"`
	First     int64  `json:"first_position"`
	Last      int64  `json:"last_position"`
}

// Batch is what one EraseBatch did: the erased payloads by session, and
// the cursor to continue from (Done when the kind has no more).
type Batch struct {
	Erased []ErasedRange
	Next   Cursor
	Done   bool
}

// Run is one sweep of a rule or one erasure request. Scope is the run's
// description as JSON (the rule or the request), recorded before it
// starts, so that a run cut short can be recorded afterwards.
type Run struct {
	ID         string
	Kind       string // "sweep" or "request"
	Scope      string
	StartedAt  time.Time
	FinishedAt time.Time
	Erased     int64
}

// RetentionAdmin holds the rules and the holds.
type RetentionAdmin interface {
	// PutRule adds a rule or replaces the one of the same name.
	PutRule(ctx context.Context, r Rule) (Rule, error)
	// DeleteRule deletes a rule and returns it, ErrNotFound if none.
	DeleteRule(ctx context.Context, name string) (Rule, error)
	Rules(ctx context.Context) ([]Rule, error)
	// PutHold sets a hold; ErrConflict if the case has a standing hold.
	PutHold(ctx context.Context, h Hold) (Hold, error)
	// ReleaseHold releases the case's standing hold, ErrNotFound if none.
	ReleaseHold(ctx context.Context, caseName, by, reason string) (Hold, error)
	// Holds lists the standing holds, and the released ones too with all.
	Holds(ctx context.Context, all bool) ([]Hold, error)
}

// PayloadSweeper erases payloads in bounded batches and keeps the runs.
type PayloadSweeper interface {
	// CanErase returns nil when the store may erase (on PostgreSQL, when
	// its login can take the eraser role), and otherwise an error naming
	// what is missing. It writes nothing: a sweep or request asks it
	// before it records a run.
	CanErase(ctx context.Context) error
	// EraseBatch erases, in one transaction, the payloads of kind in scope
	// among the next limit payloads after from, skipping those a standing
	// hold covers; each erased payload gets its erasures row (reason, by,
	// runID) in the same transaction.
	EraseBatch(ctx context.Context, kind string, s PayloadScope, from Cursor, limit int, runID, reason, by string) (Batch, error)
	StartRun(ctx context.Context, r Run) error
	FinishRun(ctx context.Context, id string, erased int64) error
	UnfinishedRuns(ctx context.Context) ([]Run, error)
	// RunErasures summarises what a run erased, from the erasures rows.
	RunErasures(ctx context.Context, id string) ([]ErasedRange, error)
}

// RetentionStatus is the dashboard's view of retention: payloads erased by
// sweeps and by erasure requests, the last sweep, the standing holds and
// each rule's next expiry.
type RetentionStatus struct {
	ErasedBySweeps   int64
	ErasedByRequests int64
	LastSweep        time.Time
	StandingHolds    int64
	Rules            []RuleStatus
}

// RuleStatus is one rule and when the oldest payload in its scope expires
// (zero when none is stored).
type RuleStatus struct {
	Rule       Rule
	NextExpiry time.Time
}
