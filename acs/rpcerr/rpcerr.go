// Package rpcerr is the error code registry of ACS v0.1.0: the JSON-RPC 2.0
// codes of ACS §17 and the ACS-specific codes -32000..-32007 of §17.1, with
// the one place where a Go error becomes a code.
//
// Packages that refuse a request wrap one of the sentinels below
// (fmt.Errorf("...: %w", rpcerr.ErrReplayDetected)) or return an *Error
// carrying per-code data; the JSON-RPC layer calls [From] once, at the edge.
//
// [JSON-RPC 2.0]: https://www.jsonrpc.org/specification#error_object
package rpcerr

import (
	"errors"
	"fmt"
	"strings"
)

// Code is a JSON-RPC 2.0 error code.
type Code int

// JSON-RPC 2.0 codes (ACS §17).
const (
	ParseError     Code = -32700
	InvalidRequest Code = -32600
	MethodNotFound Code = -32601
	InvalidParams  Code = -32602
	InternalError  Code = -32603
)

// ACS error code registry (ACS §17.1). The range -32000..-32099 is reserved
// for ACS; v0.1.0 assigns the first eight.
const (
	SessionRefused          Code = -32000
	UnsupportedVersion      Code = -32001
	ProvenanceRequired      Code = -32002
	CapabilityNotNegotiated Code = -32003
	SignatureInvalid        Code = -32004
	ReplayDetected          Code = -32005
	TimestampOutOfWindow    Code = -32006
	ChainMismatch           Code = -32007
)

// Sentinels, one per registered code. Wrap them with %w; [CodeOf] finds
// them with errors.Is.
var (
	ErrParse                   = errors.New("parse error")
	ErrInvalidRequest          = errors.New("invalid request")
	ErrMethodNotFound          = errors.New("method not found")
	ErrInvalidParams           = errors.New("invalid params")
	ErrInternal                = errors.New("internal error")
	ErrSessionRefused          = errors.New("session refused")
	ErrUnsupportedVersion      = errors.New("unsupported version")
	ErrProvenanceRequired      = errors.New("provenance required")
	ErrCapabilityNotNegotiated = errors.New("capability not negotiated")
	ErrSignatureInvalid        = errors.New("signature invalid")
	ErrReplayDetected          = errors.New("replay detected")
	ErrTimestampOutOfWindow    = errors.New("timestamp out of window")
	ErrChainMismatch           = errors.New("chain mismatch")
)

// registry lists every registered code with its name as the spec spells it:
// the JSON-RPC 2.0 message for -32700..-32603 (ACS §17) and the ACS name for
// -32000..-32007 (ACS §17.1).
var registry = []struct {
	code     Code
	name     string
	sentinel error
}{
	{ParseError, "Parse error", ErrParse},
	{InvalidRequest, "Invalid Request", ErrInvalidRequest},
	{MethodNotFound, "Method not found", ErrMethodNotFound},
	{InvalidParams, "Invalid params", ErrInvalidParams},
	{InternalError, "Internal error", ErrInternal},
	{SessionRefused, "SESSION_REFUSED", ErrSessionRefused},
	{UnsupportedVersion, "UNSUPPORTED_VERSION", ErrUnsupportedVersion},
	{ProvenanceRequired, "PROVENANCE_REQUIRED", ErrProvenanceRequired},
	{CapabilityNotNegotiated, "CAPABILITY_NOT_NEGOTIATED", ErrCapabilityNotNegotiated},
	{SignatureInvalid, "SIGNATURE_INVALID", ErrSignatureInvalid},
	{ReplayDetected, "REPLAY_DETECTED", ErrReplayDetected},
	{TimestampOutOfWindow, "TIMESTAMP_OUT_OF_WINDOW", ErrTimestampOutOfWindow},
	{ChainMismatch, "CHAIN_MISMATCH", ErrChainMismatch},
}

// Codes returns every registered code, JSON-RPC codes first, then the ACS
// registry in order.
func Codes() []Code {
	out := make([]Code, len(registry))
	for i, r := range registry {
		out[i] = r.code
	}
	return out
}

// Name returns the code's registered name ("SIGNATURE_INVALID",
// "Invalid params"), or "" for an unregistered code.
func (c Code) Name() string {
	for _, r := range registry {
		if r.code == c {
			return r.name
		}
	}
	return ""
}

// IsACS reports whether c lies in the range ACS reserves, -32000..-32099.
// ACS §13: system/ping must never be answered with such a code.
func (c Code) IsACS() bool { return -32099 <= c && c <= -32000 }

func (c Code) String() string {
	if n := c.Name(); n != "" {
		return fmt.Sprintf("%d %s", int(c), n)
	}
	return fmt.Sprintf("%d", int(c))
}

// CodeByName returns the code registered under name (as [Code.Name] spells
// it).
func CodeByName(name string) (Code, bool) {
	for _, r := range registry {
		if r.name == name {
			return r.code, true
		}
	}
	return 0, false
}

// Sentinel returns the sentinel error of a registered code, or nil.
func (c Code) Sentinel() error {
	for _, r := range registry {
		if r.code == c {
			return r.sentinel
		}
	}
	return nil
}

// sentinelCode is the one mapping from Go errors to codes. The ACS codes
// come first: an error that wraps both a specific ACS condition and a
// generic JSON-RPC one (a malformed signature inside well-formed params)
// reports the specific condition.
func sentinelCode(err error) (Code, bool) {
	for _, acsFirst := range [2]bool{true, false} {
		for _, r := range registry {
			if r.code.IsACS() == acsFirst && errors.Is(err, r.sentinel) {
				return r.code, true
			}
		}
	}
	return 0, false
}

// CodeOf returns the code for err: the code of the first *Error in its
// chain, else the code of the registered sentinel it wraps, else
// InternalError. CodeOf(nil) is 0.
func CodeOf(err error) Code {
	if err == nil {
		return 0
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if c, ok := sentinelCode(err); ok {
		return c
	}
	return InternalError
}

// Error is a JSON-RPC 2.0 error object. Its JSON form is the "error" member
// of a response envelope (acs-response-envelope $defs/JsonRpcError).
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	// Data is the optional data member. ACS §17.1: when present it SHOULD
	// carry "reason" (machine-readable) and "message" (human-readable),
	// plus the per-code fields (supported_versions, method,
	// skew_window_ms).
	Data map[string]any `json:"data,omitempty"`

	// cause is the Go error this one was made from; not serialized.
	cause error
}

// New returns an *Error with the registered name of code as message and
// data.reason and data.message filled in. Further data members (the
// per-code fields of ACS §17.1) can be added to the returned Data.
func New(code Code, message string) *Error {
	return &Error{
		Code:    code,
		Message: messageFor(code),
		Data:    map[string]any{"reason": reasonFor(code), "message": message},
	}
}

// From converts any error to the *Error sent on the wire. An *Error in the
// chain is returned as is. Otherwise the code comes from [CodeOf]; the text
// of an internal error is not sent (it may name hosts or files), only its
// code and the fixed message.
func From(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	code := CodeOf(err)
	msg := err.Error()
	if code == InternalError {
		msg = "internal error"
	}
	out := New(code, msg)
	out.cause = err
	return out
}

func (e *Error) Error() string {
	if m, ok := e.Data["message"].(string); ok && m != "" {
		return fmt.Sprintf("%s: %s", e.Code, m)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns the error e was made from by [From], if any.
func (e *Error) Unwrap() error { return e.cause }

// Is reports whether target is the sentinel of e's code, so
// errors.Is(rpcerr.New(rpcerr.ReplayDetected, ...), rpcerr.ErrReplayDetected)
// holds.
func (e *Error) Is(target error) bool {
	s := e.Code.Sentinel()
	return s != nil && s == target
}

// messageFor is the error object's "message": the registered name, which is
// what JSON-RPC 2.0 uses for its own codes and what ACS §17.1 names.
func messageFor(c Code) string {
	if n := c.Name(); n != "" {
		return n
	}
	return "Server error"
}

// reasonFor is the default data.reason: the ACS name in lower case
// ("signature_invalid"), or the JSON-RPC message in snake case
// ("invalid_params").
func reasonFor(c Code) string {
	n := c.Name()
	if n == "" {
		return "unknown"
	}
	return strings.ReplaceAll(strings.ToLower(n), " ", "_")
}
