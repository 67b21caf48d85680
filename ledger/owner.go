package ledger

import (
	"errors"
	"fmt"

	"github.com/acsledger/acsledger/acs"
)

// Writer kinds. Every session is owned by the kind of writer whose append
// created it, recorded with the session (migration 0009), and accepts
// entries from that kind only: a chain the Guardian signs holds only what
// the Guardian decided, and a chain written through the plain API or
// ingest never gets a Guardian entry spliced in.
const (
	// WriterExternal is the plain append API and ingest: entries the ledger
	// chains but no Guardian of this ledger decided.
	WriterExternal = "external"
	// WriterGuardian is this ledger's Guardian, whose entries carry a
	// signed response.
	WriterGuardian = "guardian"
)

// Sentinel errors of session ownership and of compare-and-swap appends.
var (
	// ErrWriterMismatch: the session is owned by the other kind of writer.
	ErrWriterMismatch = errors.New("session owned by another writer")
	// ErrHeadMoved: the session's head is not the one the append expected.
	ErrHeadMoved = errors.New("session head moved")
)

// Head is a session's chain head as a writer saw it: Length entries, the
// newest with entry_hash Hash. Length 0 is a session that does not exist
// yet (Hash is then zero).
type Head struct {
	Length int64
	Hash   acs.Hash
}

func (h Head) String() string {
	if h.Length == 0 {
		return "no session"
	}
	return fmt.Sprintf("length %d, head %s", h.Length, h.Hash)
}

// HeadMovedError reports an append whose Record.Expect is not the session's
// head: another writer appended after the caller decided. Nothing of the
// record is written. It matches ErrHeadMoved.
type HeadMovedError struct {
	Index     int
	SessionID string
	Expected  Head
	Actual    Head
}

func (e *HeadMovedError) Error() string {
	return fmt.Sprintf("entry %d for session %q was decided against %s, but the session holds %s",
		e.Index, e.SessionID, e.Expected, e.Actual)
}

func (e *HeadMovedError) Is(target error) bool { return target == ErrHeadMoved }

// WriterMismatchError reports an append by a kind of writer that does not
// own the session. Nothing of the record is written. It matches
// ErrWriterMismatch.
type WriterMismatchError struct {
	Index     int
	SessionID string
	// Writer is the record's kind, Owner the session's.
	Writer, Owner string
}

func (e *WriterMismatchError) Error() string {
	return fmt.Sprintf("entry %d for session %q: the session is written by the %s writer and accepts no entry from the %s writer",
		e.Index, e.SessionID, e.Owner, e.Writer)
}

func (e *WriterMismatchError) Is(target error) bool { return target == ErrWriterMismatch }
