package verify

import "fmt"

// Finding codes. They are part of acsledger's contract with auditors and
// their tools: a code is never renamed or reused for another meaning. Each is
// described, with its usual cause, in docs/findings.md.
const (
	// CodeEntryHashMismatch: the entry's content and its own previous_hash
	// do not hash to its stated entry_hash.
	CodeEntryHashMismatch = "entry_hash_mismatch"

	// CodePreviousHashMismatch: the entry's previous_hash does not name the
	// entry before it in the input.
	CodePreviousHashMismatch = "previous_hash_mismatch"

	// CodeRootHasPrevious: the first entry has a non-null previous_hash.
	CodeRootHasPrevious = "root_has_previous"

	// CodeFork: the entry names the same parent as an earlier entry of the
	// input, so the chain has two different entries at one position.
	CodeFork = "fork"
)

// A Finding is one place where the evidence does not verify. Expected and
// Actual are lowercase hex hashes, or "" for a null or absent member; what
// each one means depends on Code and is documented in docs/findings.md.
type Finding struct {
	Code       string `json:"code"`
	EntryIndex int    `json:"entry_index"` // 0-based position in the input
	EntryID    string `json:"entry_id"`
	StepID     string `json:"step_id"`
	Expected   string `json:"expected"`
	Actual     string `json:"actual"`
	Message    string `json:"message"` // one plain sentence
}

// Error makes a Finding usable where an error is wanted, for example when a
// caller stops at the first problem.
func (f Finding) Error() string {
	return fmt.Sprintf("entry %d (entry_id %q): %s: %s", f.EntryIndex, f.EntryID, f.Code, f.Message)
}
