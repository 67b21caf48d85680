package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrReplay is returned by RecordRequest when a session has already seen the
// request_id or the nonce (ACS §10.3).
var ErrReplay = errors.New("replayed request")

// What a Guardian keeps in the ledger beyond Store is four roles: the
// signed response and the request's params beside each entry
// (StepRecorder, StepReader, ParamsEraser) and the policy bundles its
// decisions reference (PolicyBundleStore). Both stores implement them all
// and ledger/storetest checks them. Code that uses a store takes the roles
// it calls, never the whole of it; only ledger/storeopen, which opens a
// store, composes them.

// StepRecorder is what the Guardian writes for each request it decides:
// the entry with its signed response and params, and the request's
// anti-replay key (ACS §10.3), in a history that survives restarts.
type StepRecorder interface {
	// AppendRequest appends r, the entry of a request that carries a
	// replay key, like Store.Append and, in the same transaction, records
	// seen as RecordRequest does and stores the signed response that sign
	// builds from the append's result (whose EntryHash is the chain_hash
	// the response must carry, ACS §8.6) and params, the request's params
	// exactly as received (nil stores none). The params are kept apart
	// from the chained entry, which commits to them only through its
	// request_hash, so that they can be erased later without breaking any
	// hash (docs/storage.md, "Request params"). If sign returns an error,
	// no entry, response or params are written. If the session has
	// already seen seen.RequestID or seen.Nonce, or already holds an entry
	// with the entry's step_id (so a retry is a replay here, not an
	// idempotent append), it returns an error wrapping ErrReplay without
	// calling sign and writes nothing else: no entry, no response, no
	// params. Concurrent appends with the same key in one session commit
	// at most one; the others get ErrReplay.
	AppendRequest(ctx context.Context, r Record, params []byte, seen Seen, sign func(Appended) ([]byte, error)) (Appended, []byte, error)

	// RecordRequest remembers a request's request_id and nonce (nonce may
	// be "") for a session and returns ErrReplay if the session has seen
	// either before. It is durable when it returns.
	RecordRequest(ctx context.Context, sessionID, requestID, nonce string, at time.Time) error
}

// StepReader reads what StepRecorder stored beside an entry.
type StepReader interface {
	// Response returns the exact bytes of the response stored beside a
	// session's entry at position, or ErrNotFound.
	Response(ctx context.Context, sessionID string, position int64) ([]byte, error)

	// Request returns the exact params bytes stored beside a session's
	// entry at position. Params that were erased are an *ErasedError
	// (matching ErrErased, not ErrNotFound), carrying when, why and by
	// whom; params never stored are ErrNotFound.
	Request(ctx context.Context, sessionID string, position int64) ([]byte, error)
}

// ParamsEraser erases the params stored beside an entry.
type ParamsEraser interface {
	// EraseParams erases the params stored beside a session's entry at
	// position, in one transaction: it records the erasure (reason must
	// not be blank) and deletes the params, and returns the record. The
	// entry, with its request_hash, and the response stay byte for byte,
	// so the chain and every proof over it still verify (docs/storage.md,
	// "Request params"). It returns ErrNotFound when no params are stored
	// there and never were, and an *ErasedError naming the earlier
	// erasure when they were already erased; either way it writes nothing.
	EraseParams(ctx context.Context, sessionID string, position int64, reason, by string) (Erasure, error)
}

// PolicyBundleStore keeps the policy bundles (ACS §12.1) that decisions
// reference by version.
type PolicyBundleStore interface {
	// PutPolicyBundle records a policy bundle before any decision uses
	// it. It is idempotent for identical (ID, Version, Digest); the same
	// ID and Version with a different digest is ErrConflict.
	PutPolicyBundle(ctx context.Context, b PolicyBundle) error
	PolicyBundleReader
}

// PolicyBundleReader reads the recorded policy bundles.
type PolicyBundleReader interface {
	// PolicyBundle returns one by ID and version, or ErrNotFound.
	PolicyBundle(ctx context.Context, id, version string) (PolicyBundle, error)
	// PolicyBundles lists them all, oldest first, without their Content.
	PolicyBundles(ctx context.Context) ([]PolicyBundle, error)
}

// ErrErased is matched by the *ErasedError of StepReader.Request,
// SourceReader.Source, EraseParams and EraseSource: the payload was
// erased.
var ErrErased = errors.New("payload erased")

// Erasure records the erasure of a payload stored beside one entry: the
// request params of a Guardian step, or the source record of an ingested
// entry.
type Erasure struct {
	SessionID string
	Position  int64
	// Payload is what was erased: PayloadParams ("" reads as params, as
	// before sources were erasable) or PayloadSource.
	Payload  string
	ErasedAt time.Time
	// Reason is why they were erased (never blank), ErasedBy who asked
	// ("" when not given), both as given to EraseParams.
	Reason   string
	ErasedBy string
}

// MaxErasureText caps the bytes of an erasure's reason and of its erased_by.
const MaxErasureText = 4096

// Check reports an erasure request the stores refuse before writing: an
// empty session id, a negative position, a blank reason, or a reason or
// erased_by that is not UTF-8 or longer than MaxErasureText bytes.
func (e Erasure) Check() error {
	where := fmt.Sprintf("erasure of session %q position %d", e.SessionID, e.Position)
	switch {
	case e.SessionID == "":
		return fmt.Errorf("%s: empty session id", where)
	case e.Position < 0:
		return fmt.Errorf("%s: negative position", where)
	case strings.TrimSpace(e.Reason) == "":
		return fmt.Errorf("%s: the reason must not be blank", where)
	}
	for _, f := range []struct{ name, v string }{{"reason", e.Reason}, {"erased_by", e.ErasedBy}} {
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("%s: %s is not valid UTF-8", where, f.name)
		}
		if len(f.v) > MaxErasureText {
			return fmt.Errorf("%s: %s is %d bytes, more than %d", where, f.name, len(f.v), MaxErasureText)
		}
	}
	return nil
}

// What names the erased payload in a sentence.
func (e Erasure) What() string {
	if e.Payload == PayloadSource {
		return "source record"
	}
	return "request params"
}

// ErasedError reports params that were erased, with the erasure's record.
// It matches ErrErased.
type ErasedError struct{ Erasure Erasure }

func (e *ErasedError) Error() string {
	by := ""
	if e.Erasure.ErasedBy != "" {
		by = fmt.Sprintf(" by %q", e.Erasure.ErasedBy)
	}
	verb := "were"
	if e.Erasure.Payload == PayloadSource {
		verb = "was"
	}
	return fmt.Sprintf("the %s of session %q position %d %s erased at %s%s, reason: %q",
		e.Erasure.What(), e.Erasure.SessionID, e.Erasure.Position, verb, e.Erasure.ErasedAt.UTC().Format(time.RFC3339Nano), by, e.Erasure.Reason)
}

func (e *ErasedError) Is(target error) bool { return target == ErrErased }

// Seen is a request's replay key (ACS §10.3): its request_id and nonce
// ("" when it had none), and when the Guardian saw it.
type Seen struct {
	RequestID string
	Nonce     string
	At        time.Time
}

// PolicyBundle is one recorded version of a policy bundle (ACS §12.1).
type PolicyBundle struct {
	ID      string
	Version string
	// Digest is the lowercase hex SHA-256 of Content.
	Digest string
	// Content is the bundle itself (a tar.gz or a JSON document of Rego
	// modules and data, as the policy layer defines).
	Content    []byte
	RecordedAt time.Time
}
