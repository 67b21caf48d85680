package ledger

import (
	"context"
	"errors"
	"time"
)

// ErrReplay is returned by RecordRequest when a session has already seen the
// request_id or the nonce (ACS §10.3).
var ErrReplay = errors.New("replayed request")

// GuardianStore is what a Guardian needs beyond Store: the signed response
// and the request's params beside each entry, a replay history that
// survives restarts, and the policy bundles its decisions reference. Both
// stores implement it.
//
// AppendSigned appends r like Append and, in the same transaction, stores
// the signed response that sign builds from the append's result (whose
// EntryHash is the chain_hash the response must carry, ACS §8.6) and params,
// the request's params exactly as received (nil stores none). The params
// are kept apart from the chained entry, which commits to them only through
// its request_hash, so that they can be erased later without breaking any
// hash (docs/storage.md, "Request params"). If sign returns an error
// nothing is written. An idempotent retry (see Store) returns the original
// result and the response stored with it, without calling sign and without
// storing params again.
//
// AppendRequest is AppendSigned for the entry of a request that carries a
// replay key: in the same transaction it records seen as RecordRequest
// does. If the session has already seen seen.RequestID or seen.Nonce, or
// already holds an entry with the entry's step_id, it returns an error
// wrapping ErrReplay and writes nothing else: no entry, no response, no
// params. Concurrent appends with the same key in one session commit at
// most one; the others get ErrReplay.
//
// Response returns the exact bytes of the response stored beside a
// session's entry at position, or ErrNotFound.
//
// Request returns the exact params bytes stored beside a session's entry at
// position, or ErrNotFound when none were stored (or they were erased).
//
// RecordRequest remembers a request's request_id and nonce (nonce may be
// "") for a session and returns ErrReplay if the session has seen either
// before. It is durable when it returns.
//
// PutPolicyBundle records a policy bundle before any decision uses it. It
// is idempotent for identical (ID, Version, Digest); the same ID and Version
// with a different digest is ErrConflict. PolicyBundle returns one by ID and
// version, or ErrNotFound; PolicyBundles lists them all, oldest first,
// without their Content.
type GuardianStore interface {
	Store
	AppendSigned(ctx context.Context, r Record, params []byte, sign func(Appended) ([]byte, error)) (Appended, []byte, error)
	AppendRequest(ctx context.Context, r Record, params []byte, seen Seen, sign func(Appended) ([]byte, error)) (Appended, []byte, error)
	Response(ctx context.Context, sessionID string, position int64) ([]byte, error)
	Request(ctx context.Context, sessionID string, position int64) ([]byte, error)
	RecordRequest(ctx context.Context, sessionID, requestID, nonce string, at time.Time) error
	PutPolicyBundle(ctx context.Context, b PolicyBundle) error
	PolicyBundle(ctx context.Context, id, version string) (PolicyBundle, error)
	PolicyBundles(ctx context.Context) ([]PolicyBundle, error)
}

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
