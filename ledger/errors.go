package ledger

import (
	"errors"
	"fmt"

	"github.com/acsledger/acsledger/acs"
)

// Sentinel errors of the Store contract. ErrInvalidEntry,
// ErrHashMismatch and ErrConflict are matched by the errors below that
// carry the details; ErrAgentMismatch refuses an append whose agent id is
// not the session's; ErrNotFound is a read of nothing; and ErrClosed is
// returned by appends on a closed store (an append that raced with Close
// may or may not be stored; retrying is safe).
var (
	ErrInvalidEntry, ErrHashMismatch, ErrConflict = errors.New("invalid entry"), errors.New("hash mismatch"), errors.New("conflicting entry")
	ErrAgentMismatch, ErrNotFound, ErrClosed      = errors.New("agent id mismatch"), errors.New("not found"), errors.New("ledger store closed")
)

// InvalidEntryError reports input the ledger refuses before touching the
// chain. It matches ErrInvalidEntry and unwraps to the parse error.
type InvalidEntryError struct {
	// Index is the record's index in the AppendBatch call (0 for Append).
	Index     int
	SessionID string
	Err       error
}

func (e *InvalidEntryError) Error() string {
	return fmt.Sprintf("invalid entry %d for session %q: %v", e.Index, e.SessionID, e.Err)
}

func (e *InvalidEntryError) Unwrap() error        { return e.Err }
func (e *InvalidEntryError) Is(target error) bool { return target == ErrInvalidEntry }

// HashMismatchError reports a submitted chain link that disagrees with the
// ledger's. It matches ErrHashMismatch.
type HashMismatchError struct {
	Index     int
	SessionID string
	// Position is where the entry would have gone.
	Position int64
	// Member is "entry_hash" or "previous_hash".
	Member string
	// Expected is the ledger's value (nil: null, the session is new);
	// Actual is the submitted one.
	Expected *acs.Hash
	Actual   *acs.Hash
}

func (e *HashMismatchError) Error() string {
	return fmt.Sprintf("entry %d for session %q at position %d: submitted %s %s, ledger computed %s",
		e.Index, e.SessionID, e.Position, e.Member, hashText(e.Actual), hashText(e.Expected))
}

func (e *HashMismatchError) Is(target error) bool { return target == ErrHashMismatch }

// ConflictError reports a step_id the session already holds with different
// content. It matches ErrConflict.
type ConflictError struct {
	Index     int
	SessionID string
	StepID    string
	// Position and EntryHash identify the entry already stored.
	Position  int64
	EntryHash acs.Hash
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("entry %d for session %q: step_id %q is already stored at position %d (entry_hash %s) with different content",
		e.Index, e.SessionID, e.StepID, e.Position, e.EntryHash)
}

func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

func hashText(h *acs.Hash) string {
	if h == nil {
		return "null"
	}
	return h.String()
}
