package ledger

import (
	"context"
	"errors"
	"time"

	"github.com/acsledger/acsledger/acs"
)

// Export reads the ledger in the Merkle log's order (docs/export.md). A
// position in that order is a leaf index: gap-free, global, never reused,
// and replicated with the log, so an export cursor means the same thing
// after a restart and on a promoted standby. An entry is exported once it
// has its leaf, about a second after it is committed (the integrator's
// period).

// ExportEntry is one entry as export reads it: the entry's canonical bytes
// with the evidence handle (session, position, hash, leaf) and what the
// encodings need beside it.
type ExportEntry struct {
	LeafIndex uint64
	SessionID string
	Position  int64
	EntryHash acs.Hash
	AgentID   string
	// Source is who wrote the entry: "guardian", or the ingest source
	// (opa, bash-guard, a2h, acs, ...), from the search projection.
	Source     string
	RecordedAt time.Time
	// Content is the entry's canonical bytes (RFC 8785).
	Content []byte
	// Response is the signed response stored with the entry, nil if none.
	Response []byte
	// Params are the request's params, opened, when the filter asked for
	// them and they are stored (nil when erased or absent).
	Params []byte
}

// ExportFilter selects a page of ExportEntries: the entries whose leaf
// index is in [From, To), in leaf order, at most Limit of them.
type ExportFilter struct {
	From, To uint64
	// AgentPrefix, when not empty, keeps only entries of agents whose id
	// starts with it (a scoped token's view).
	AgentPrefix string
	Limit       int
	// WithParams reads and opens the request params too.
	WithParams bool
}

// MaxExportPage caps one page of ExportEntries.
const MaxExportPage = 10000

// ExportCursor is the durable delivery state of one export sink
// (docs/export.md, "Counters").
type ExportCursor struct {
	Name string
	// Next is where delivery resumes after a restart: the first leaf the
	// sink has not acknowledged, or, for a sink whose receiver never
	// confirms (plain TCP syslog), the start of its re-send window.
	Next uint64
	// SentTo is the end of what has been written to a receiver at least
	// once (column sending_to): a leaf below it that is sent again counts
	// in Resent.
	SentTo uint64
	// Acknowledged counts entries the receiver confirmed (RELP rsp, HTTP
	// 2xx, HEC ack, OTLP success, file fsync), each once. SentUnconfirmed
	// counts entries written to a receiver that never confirms, each
	// once. Resent counts every send of an entry that had been sent
	// before: the receiver may hold that many duplicates.
	Acknowledged, SentUnconfirmed, Resent int64
	UpdatedAt                             time.Time
}

// ErrCursorMoved is returned by ExportStore.PutExportCursor when the
// stored cursor is not the one the caller expected: another process
// delivers for the same sink name.
var ErrCursorMoved = errors.New("export cursor moved concurrently")

// ExportStore is the store's part of export (migrations 0020, 0023).
//
//   - ExportEntries returns the page f selects, possibly empty, and at
//     most MaxExportPage entries whatever f.Limit asks.
//   - ExportCursor returns ErrNotFound for a sink that never saved one.
//   - PutExportCursor creates c, or moves the stored cursor of c.Name
//     whose Next is expectNext to c; it returns ErrCursorMoved otherwise.
//     A cursor never moves back, nor does SentTo or a count.
//   - LogSize is the number of leaves of the Merkle log.
type ExportStore interface {
	ExportEntries(ctx context.Context, f ExportFilter) ([]ExportEntry, error)
	ExportCursor(ctx context.Context, name string) (ExportCursor, error)
	ExportCursors(ctx context.Context) ([]ExportCursor, error)
	PutExportCursor(ctx context.Context, c ExportCursor, expectNext uint64) error
	LogSize(ctx context.Context) (uint64, error)
}
