// Package acs is the protocol vocabulary of the Agent Control Standard (ACS)
// v0.1.0 as acsledger speaks it: RFC 8785 canonical JSON and the chain
// hashing rules of ACS §8. Its subpackages hold the rest of the vocabulary:
// the JSON-RPC error registry (acs/rpcerr), the signature algorithm
// registry and envelopes (acs/sig) and the JSON Schemas (acs/schemas).
//
// # Canonical JSON
//
// [Canonicalize] implements the JSON Canonicalization Scheme of [RFC 8785]
// in one pass over the input bytes: it parses and writes the canonical form
// at once, sorting each object's members by UTF-16 code units when the
// object closes. It is strict where hashing and signing need it to be: it
// refuses duplicate members, invalid UTF-8, lone surrogates, numbers beyond
// the IEEE 754 double range and trailing data, each with a [*JSONError]
// naming the byte offset and wrapping one of the Err* classes, rather than
// guessing what such input meant. docs/jcs.md records the choices.
//
// # Chain hashing
//
// [ParseEntry] splits a ContextEntry into the content its entry_hash commits
// to (ACS §8.2) and the chain links; [EntryHash] chains it to the previous
// entry; [RequestHash] hashes a request's params (ACS §8.1).
//
// [RFC 8785]: https://www.rfc-editor.org/rfc/rfc8785
package acs
