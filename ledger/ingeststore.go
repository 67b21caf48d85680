package ledger

import (
	"context"
	"time"

	"github.com/acsledger/acsledger/acs"
)

// IngestStore keeps records that other systems wrote (OPA decision logs,
// bash-guard decisions, A2H resolutions, another Guardian's traffic; see
// the ingest package) beside the chains they are appended to. Both stores
// implement it.
//
// Ingest handles one batch in one transaction: for each record, in order,
//
//   - a record whose (Source, Key) is already stored is a duplicate, and
//     nothing is written for it; the result names the stored entry. If its
//     Digest differs from the stored one it is quarantined instead, with
//     ReasonKeyConflict: the same key with other content is not a retry;
//   - a record whose (Source, ReplayKey) is already stored under another
//     Key is quarantined with ReasonReplayedJTI;
//   - a record carrying a Quarantine, or one the ledger refuses (an
//     invalid entry, a Head that is not the recomputed entry_hash), is
//     written to the quarantine with its reason and exact bytes; the
//     quarantine keeps one row per (Source, File, Record, digest of Raw),
//     so re-running a file does not repeat it;
//   - any other record is appended to its session's chain, with Response
//     stored beside the entry, and its key, flags and digest are recorded.
//
// Either the whole batch is written or none of it: a crash mid-batch
// leaves each record applied or not, and re-running the batch finds the
// applied ones as duplicates. Concurrent Ingest calls with overlapping
// keys append each key at most once. The results are indexed like rs.
//
// IngestedByKey returns the stored result of a key (Status
// IngestAccepted), or ErrNotFound. Quarantined lists quarantined records,
// oldest first, after the cursor (a Seq). Flagged lists ingested records
// carrying a flag, oldest first, after the cursor.
type IngestStore interface {
	Store
	Ingest(ctx context.Context, rs []IngestRecord) ([]IngestResult, error)
	IngestedByKey(ctx context.Context, source, key string) (IngestResult, error)
	Quarantined(ctx context.Context, f IngestFilter) ([]Quarantined, error)
	Flagged(ctx context.Context, flag string, f IngestFilter) ([]IngestResult, error)
}

// Reason codes a store itself gives (the ingest package has the others).
const (
	// ReasonChainMismatch: the chain_hash a record carries is not the head
	// the ledger computed for it.
	ReasonChainMismatch = "chain_mismatch"
	// ReasonReplayedJTI: a record's replay key was already used by a
	// record with another natural key.
	ReasonReplayedJTI = "replayed_jti"
	// ReasonKeyConflict: the natural key is stored with other content.
	ReasonKeyConflict = "key_conflict"
	// ReasonLedgerRefused: the ledger refused the mapped entry (an
	// invalid entry, or a session of another agent).
	ReasonLedgerRefused = "ledger_refused"
)

// IngestRecord is one source record, mapped and checked by the ingest
// package.
type IngestRecord struct {
	// Source names the format ("opa", "bash-guard", ...); Key is the
	// record's natural key, unique per Source ("" only when Quarantine is
	// set and the record had no readable key).
	Source, Key string
	// ReplayKey, when set, must not recur under another Key (A2H jti).
	ReplayKey string
	// Digest identifies the record's content: a redelivery with the same
	// Key and Digest is a duplicate.
	Digest acs.Hash
	// File and Record say where it came from: Record is the 1-based line,
	// or the 1-based index in a JSON array.
	File   string
	Record int64
	// Raw is the record's exact source bytes.
	Raw []byte
	// KeepSource stores Raw beside the appended entry as its source
	// record (sealed at rest, erasable: SourceReader, SourceEraser), in
	// the batch's transaction. The entry commits to it by source_sha256,
	// the lowercase hex SHA-256 of Raw.
	KeepSource bool

	// Entry is the ContextEntry to append, unless Quarantine is set.
	// Parsed, when set, must be acs.ParseEntry(Entry.Entry): a writer that
	// parsed it already (off the store's transaction) saves the store the
	// work.
	Entry  Record
	Parsed *acs.Entry
	// Response, when set, is stored beside the entry as its signed
	// response; Params, when set, as its request params
	// (StepReader.Request).
	Response, Params []byte
	// Head, when set, must equal the entry_hash the ledger computes for
	// Entry (the chain_hash the source published).
	Head *acs.Hash
	// Flags are stored with the record and can be queried (Flagged).
	Flags []string

	// Quarantine, when set, sends the record to the quarantine.
	Quarantine *Quarantine
}

// Quarantine says why a record was not appended.
type Quarantine struct {
	Reason string // a reason code, docs/findings.md
	Detail string // a human-readable explanation
}

// IngestStatus is what became of an ingested record.
type IngestStatus string

// Ingest statuses.
const (
	IngestAccepted    IngestStatus = "accepted"
	IngestDuplicate   IngestStatus = "duplicate"
	IngestQuarantined IngestStatus = "quarantined"
)

// IngestResult is the outcome of one IngestRecord, or a stored record.
type IngestResult struct {
	Seq    int64
	Status IngestStatus
	Source string
	Key    string
	// Reason and Detail are set for IngestQuarantined.
	Reason, Detail string
	// SessionID, Position and EntryHash name the entry (accepted and
	// duplicate records).
	SessionID string
	Position  int64
	EntryHash acs.Hash
	Flags     []string
	File      string
	Record    int64
	At        time.Time
}

// Quarantined is one quarantined record as stored.
type Quarantined struct {
	Seq            int64
	Source, Key    string
	File           string
	Record         int64
	Reason, Detail string
	Raw            []byte
	At             time.Time
}

// IngestFilter pages Quarantined and Flagged: Source "" is every source;
// After is the Seq of the last record of the previous page; Limit as for
// PageSize.
type IngestFilter struct {
	Source string
	After  int64
	Limit  int
}
