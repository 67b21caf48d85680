// Package ledger is the append-only evidence store: per-session ACS
// ContextEntry chains (ACS §8) whose entry_hash the ledger recomputes itself,
// never trusting the submitted one.
//
// The Store interface is the contract; ledger/pgstore (PostgreSQL) and
// ledger/sqlitestore (embedded SQLite) implement it, ledger/storetest holds
// the conformance suite both pass, and ledger/storeopen picks one by URL.
//
// [ACS]: https://github.com/GenAI-Security-Project/agent-control-standard
package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/acsledger/acsledger/acs"
)

// DefaultMaxEntryBytes is the default cap on the size of one submitted
// ContextEntry.
const DefaultMaxEntryBytes = 1 << 20

// Limits on identifiers, so that an index key cannot be used to store payload.
const (
	MaxSessionIDBytes = 256
	MaxAgentIDBytes   = 256
)

// Store is an append-only store of per-session ContextEntry chains.
//
// Append and AppendBatch parse each entry with acs.ParseEntry, recompute its
// entry_hash from the canonical content and the session's current head
// (ACS §8.2), store the exact canonical content bytes, and move the session
// head by compare-and-swap, so concurrent writers never fork a chain. A
// submitted entry_hash or previous_hash is only checked, never stored as
// given. The first append to a session creates it.
//
// Errors (check with errors.Is / errors.As):
//
//   - ErrInvalidEntry, as *InvalidEntryError: the input is malformed,
//     oversized, or names an invalid session or agent id. Nothing is written.
//   - ErrHashMismatch, as *HashMismatchError: a submitted entry_hash or
//     previous_hash disagrees with the recomputed one. Nothing is written.
//   - ErrConflict, as *ConflictError: the session already holds an entry with
//     this step_id and different content. Nothing is written. The same
//     step_id with the same content is an idempotent retry: Append returns
//     the original result with Replayed set.
//   - ErrAgentMismatch: the record names an agent id that differs from the
//     one the session was created with.
//   - ErrWriterMismatch, as *WriterMismatchError: the session is owned by
//     the other kind of writer (Record.Writer). Nothing is written.
//   - ErrHeadMoved, as *HeadMovedError: the session's head is not
//     Record.Expect. Nothing is written.
//   - ErrNotFound: Session or Entries on an unknown session. EntriesByStep
//     never returns it: no match is an empty slice.
//   - ErrClosed: an append on a closed store.
//
// AppendBatch is all-or-nothing: on any error nothing of the batch is
// written, and the error carries the index of the offending record.
//
// Append and AppendBatch return only after their writes are durable.
type Store interface {
	ChainReader

	// Append appends one entry to the chain of r.SessionID. Concurrent
	// Appends may share a transaction (group commit). If ctx ends first,
	// Append returns ctx's error and the entry may or may not be stored;
	// a retry is idempotent.
	Append(ctx context.Context, r Record) (Appended, error)

	// AppendBatch appends many entries, possibly to many sessions, in one
	// transaction. Records of one session are chained in slice order.
	AppendBatch(ctx context.Context, rs []Record) ([]Appended, error)

	// Close releases the store's connections.
	Close() error
}

// ChainReader is the read side of a Store: sessions and their entries, as
// committed. Code that only reads chains (verification, evidence export,
// decision replay) takes a ChainReader.
type ChainReader interface {
	// Session returns a session and its chain head, or ErrNotFound.
	Session(ctx context.Context, sessionID string) (Session, error)

	// Sessions lists sessions in creation order, one page at a time.
	Sessions(ctx context.Context, f SessionFilter) (SessionPage, error)

	// Entries returns up to limit entries of a session in chain order,
	// starting at position from (0-based). It returns ErrNotFound for an
	// unknown session and an empty slice past the end of the chain.
	Entries(ctx context.Context, sessionID string, from int64, limit int) ([]Entry, error)

	// EntriesByStep returns the entries whose step_id is stepID: in session
	// sessionID only, or in every session when sessionID is "". It returns
	// at most MaxEntriesByStep of them, in session_id order, and an empty
	// slice (not ErrNotFound) when none matches, also for an unknown
	// session. One session holds a step_id at most once, so the caller
	// learns "none", "one" or "several sessions" from one indexed lookup
	// whose cost does not grow with the ledger (migration 0004): a Guardian
	// step's step_id is its request_id, and decisions are looked up by it.
	EntriesByStep(ctx context.Context, stepID, sessionID string) ([]Entry, error)
}

// MaxEntriesByStep bounds Store.EntriesByStep: two matches are enough to
// tell a step_id found in one session from one found in several, and
// keep the lookup's cost independent of how many sessions reuse it.
const MaxEntriesByStep = 2

// Record is one ContextEntry submitted for a session.
type Record struct {
	SessionID string

	// AgentID is the Observed Agent the session belongs to. ContextEntries do
	// not carry it, so the writer supplies it; it is recorded by the append
	// that creates the session. On later appends it may be empty; if set it
	// must match.
	AgentID string

	// Entry is the ContextEntry as JSON. Its entry_hash and previous_hash
	// members are optional; when present they must agree with the ledger.
	Entry []byte

	// Writer is the kind of writer appending (WriterExternal or
	// WriterGuardian). "" is WriterExternal for Append and AppendBatch and
	// WriterGuardian for StepRecorder.AppendRequest. The append that
	// creates a session records its writer; a later record of the other
	// kind is a *WriterMismatchError.
	Writer string

	// Expect, when set, makes the append a compare-and-swap on the head the
	// writer decided against: if the session's head (before this record,
	// after any earlier record of the same call) is not *Expect, the record
	// is a *HeadMovedError and nothing of it is written. An idempotent
	// retry of a stored step is judged before Expect.
	Expect *Head
}

// Appended is the outcome of one successful append.
type Appended struct {
	SessionID string
	// Position is the entry's 0-based index in its session's chain.
	Position  int64
	EntryHash acs.Hash
	// PreviousHash is nil for the first entry of a session.
	PreviousHash *acs.Hash
	// Replayed is set when the entry was already stored (an idempotent
	// retry) and this is the original result.
	Replayed bool
}

// Session describes one session chain.
type Session struct {
	SessionID string
	AgentID   string
	// Length is the number of entries; Head is the entry_hash of the newest
	// one, the session's chain_hash (ACS §8).
	Length int64
	Head   acs.Hash
	// Writer is the kind of writer that owns the session (WriterExternal
	// or WriterGuardian).
	Writer    string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// SessionFilter selects sessions. Zero fields do not filter.
type SessionFilter struct {
	AgentID string
	// StepType keeps sessions holding at least one entry of this step_type.
	StepType string
	// Since and Until keep sessions active in [Since, Until): created before
	// Until and last appended to at or after Since.
	Since, Until time.Time
	// Limit is the page size: 0 means DefaultPageSize, at most MaxPageSize.
	Limit int
	// Cursor is SessionPage.Next of the previous page, "" for the first.
	Cursor string
}

// Page sizes for Sessions and Entries.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// SessionPage is one page of Sessions.
type SessionPage struct {
	Sessions []Session
	// Next is the cursor of the following page, "" on the last one.
	Next string
}

// Entry is one stored ContextEntry.
type Entry struct {
	SessionID string
	Position  int64
	EntryID   string
	StepID    string
	StepType  string
	// Timestamp is the entry's own timestamp member ("" when absent);
	// RecordedAt is when the ledger stored it.
	Timestamp  string
	RecordedAt time.Time
	// Content is the exact canonical bytes entry_hash commits to: the RFC
	// 8785 form without entry_hash and previous_hash (ACS §8.2).
	Content      []byte
	EntryHash    acs.Hash
	PreviousHash *acs.Hash
}

// Options tune a store. The zero value is the default.
type Options struct {
	// MaxEntryBytes caps one submitted entry; 0 means DefaultMaxEntryBytes.
	MaxEntryBytes int
	// Now is the store's clock; nil means time.Now.
	Now func() time.Time
	// Params seals request params before a store stores them and
	// opens them when read (ledger/paramcrypt); nil stores them in clear.
	Params ParamsSealer
}

// ParamsSealer encrypts request params at rest, bound to their step.
// Open must return a record stored in clear as it is, and an error for a
// record sealed for another step or with another key.
type ParamsSealer interface {
	Seal(sessionID string, position int64, params []byte) ([]byte, error)
	Open(sessionID string, position int64, record []byte) ([]byte, error)
}

// SealParams is what a store writes for params: sealed by o.Params, or
// in clear when it is nil.
func (o Options) SealParams(sessionID string, position int64, params []byte) ([]byte, error) {
	if o.Params == nil {
		return params, nil
	}
	b, err := o.Params.Seal(sessionID, position, params)
	if err != nil {
		return nil, fmt.Errorf("couldn't encrypt the request params of session %q position %d: %w", sessionID, position, err)
	}
	return b, nil
}

// OpenParams is the params a stored record holds. Without o.Params, a
// sealed record (which starts with a NUL, never the first byte of params
// stored in clear) is an error rather than bytes that are not JSON.
func (o Options) OpenParams(sessionID string, position int64, record []byte) ([]byte, error) {
	if o.Params == nil {
		if len(record) > 0 && record[0] == 0 {
			return nil, fmt.Errorf("the request params of session %q position %d are encrypted and no master key is configured", sessionID, position)
		}
		return record, nil
	}
	b, err := o.Params.Open(sessionID, position, record)
	if err != nil {
		return nil, fmt.Errorf("couldn't decrypt the request params of session %q position %d: %w", sessionID, position, err)
	}
	return b, nil
}

// EntryCap returns the effective entry size cap.
func (o Options) EntryCap() int {
	if o.MaxEntryBytes <= 0 {
		return DefaultMaxEntryBytes
	}
	return o.MaxEntryBytes
}

// Clock returns the effective clock.
func (o Options) Clock() func() time.Time {
	if o.Now == nil {
		return time.Now
	}
	return o.Now
}

// PageSize returns the effective page size for a requested limit.
func PageSize(limit int) int {
	switch {
	case limit <= 0:
		return DefaultPageSize
	case limit > MaxPageSize:
		return MaxPageSize
	}
	return limit
}
