package ledger

import (
	"context"
	"fmt"
	"time"
)

// A what-if run (guardian/whatif, docs/whatif.md) reads the recorded steps
// a filter selects in the order the ledger recorded them, with what it
// needs to evaluate each again: the entry, the params stored beside it
// (opened), and the signed response. It reads them a page at a time,
// continuing after the last step's sequence number (keyset pagination, so
// a page costs the same however deep into the history it starts).

// StepFilter selects recorded steps. Zero fields do not filter.
type StepFilter struct {
	SessionID string
	AgentID   string
	// AgentPrefix keeps agents whose id starts with it.
	AgentPrefix string
	// Since and Until keep steps recorded in [Since, Until).
	Since, Until time.Time
	ToolName     string
	// Disposition is the recorded decision (allow, deny, modify, ask,
	// defer).
	Disposition string
	// Source is where the record came from, as SearchFilter.Source.
	Source string
	// After continues after the step with this sequence number (the
	// RecordedStep.Seq of the previous page's last step); 0 starts at the
	// first.
	After int64
	// Limit is the page size: 0 means DefaultPageSize, at most MaxPageSize.
	Limit int
}

// Search is f as a compliance-search filter (the same projection serves
// both).
func (f StepFilter) Search() SearchFilter {
	return SearchFilter{
		AgentID: f.AgentID, AgentPrefix: f.AgentPrefix, Since: f.Since, Until: f.Until,
		ToolName: f.ToolName, Disposition: f.Disposition, Source: f.Source,
	}
}

// Check refuses a filter no store should run, naming the field.
func (f StepFilter) Check() error {
	if f.After < 0 {
		return fmt.Errorf("%w: after is negative", ErrInvalidSearch)
	}
	if len(f.SessionID) > MaxAgentIDBytes {
		return fmt.Errorf("%w: session is longer than %d bytes", ErrInvalidSearch, MaxAgentIDBytes)
	}
	return f.Search().Check()
}

// RecordedStep is one recorded step as a what-if run reads it.
type RecordedStep struct {
	// Seq orders steps as the ledger recorded them; a page continues
	// after the last one's.
	Seq     int64
	Entry   Entry
	AgentID string
	// ToolName, Source and Disposition are the projection's (ledger/search.go).
	ToolName, Source, Disposition string
	// Params are the request's params exactly as received, opened when
	// sealed at rest; nil when none are stored (never stored, or erased:
	// then Erased says when, why and by whom).
	Params []byte
	Erased *Erasure
	// Response is the signed response stored beside the entry; nil when
	// none is.
	Response []byte
}

// RecordedStepReader streams recorded steps for a what-if run.
type RecordedStepReader interface {
	// RecordedSteps returns up to f.Limit steps f selects, in recorded
	// order, after f.After. A short page is the last. An invalid filter is
	// an error matching ErrInvalidSearch.
	RecordedSteps(ctx context.Context, f StepFilter) ([]RecordedStep, error)
}

// StepRef names one step by its place in its session's chain.
type StepRef struct {
	SessionID string `json:"session_id"`
	Position  int64  `json:"position"`
}
