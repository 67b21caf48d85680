package sig

import (
	"fmt"
	"strings"

	"github.com/acsledger/acsledger/acs/rpcerr"
)

// sentinel is an error class that also names its JSON-RPC code, so
// errors.Is(err, sig.ErrUnknownKey) and
// errors.Is(err, rpcerr.ErrSignatureInvalid) both hold.
type sentinel struct {
	msg  string
	code error
}

func (s *sentinel) Error() string { return s.msg }
func (s *sentinel) Unwrap() error { return s.code }

// Causes of a failed signature check. Every *Error wraps exactly one of
// them. All but ErrMalformedEnvelope, ErrNotEnvelope and ErrSessionRequired
// are SIGNATURE_INVALID (-32004) under ACS §17.1.
var (
	// ErrMalformedEnvelope: the envelope is not JSON the canonicalizer
	// accepts (RFC 8785 / I-JSON). Parse error, -32700.
	ErrMalformedEnvelope error = &sentinel{"malformed envelope", rpcerr.ErrParse}
	// ErrNotEnvelope: the JSON is not an object with exactly one of a
	// request's params, a result or an error holding an object.
	// Invalid Request, -32600.
	ErrNotEnvelope error = &sentinel{"not a JSON-RPC envelope", rpcerr.ErrInvalidRequest}
	// ErrMissingSignature: the signature member is absent.
	ErrMissingSignature error = &sentinel{"signature missing", rpcerr.ErrSignatureInvalid}
	// ErrMalformedSignature: the signature member is not an object with
	// string algorithm, key_id and value, the algorithm is not registered,
	// or the value is not standard padded base64.
	ErrMalformedSignature error = &sentinel{"signature malformed", rpcerr.ErrSignatureInvalid}
	// ErrUnknownKey: key_id names no key of the key set.
	ErrUnknownKey error = &sentinel{"unknown key_id", rpcerr.ErrSignatureInvalid}
	// ErrAlgorithmMismatch: the signature's algorithm is not the algorithm
	// of the key its key_id names.
	ErrAlgorithmMismatch error = &sentinel{"algorithm does not match key", rpcerr.ErrSignatureInvalid}
	// ErrBadSignature: the value does not verify over the signed input.
	ErrBadSignature error = &sentinel{"signature does not verify", rpcerr.ErrSignatureInvalid}
	// ErrSessionRequired: an HMAC-SHA256 key was used without a session_id
	// to derive the per-session key from. Invalid params, -32602.
	ErrSessionRequired error = &sentinel{"HMAC-SHA256 needs a session_id", rpcerr.ErrInvalidParams}
)

// Error is a failed signature operation on an envelope: which cause, where,
// and with which key.
type Error struct {
	// Kind is one of the Err* causes above.
	Kind error
	// Member is the envelope member whose signature was checked, or 0 if
	// the envelope could not be classified.
	Member Member
	// KeyID and Algorithm are the signature's, when it could be read.
	KeyID     string
	Algorithm Algorithm
	// Err is the underlying error, if any (a canonicalizer error, a
	// hybrid decoding error).
	Err error
	// Detail says what exactly is wrong.
	Detail string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Member != 0 {
		fmt.Fprintf(&b, "%s.signature: ", e.Member)
	}
	b.WriteString(e.Kind.Error())
	if e.KeyID != "" || e.Algorithm != "" {
		fmt.Fprintf(&b, " (key_id %q, algorithm %q)", e.KeyID, e.Algorithm)
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause and the underlying error.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}
