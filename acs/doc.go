// Package acs is the protocol vocabulary of the Agent Control Standard (ACS)
// v0.1.0 as acsledger speaks it: RFC 8785 canonical JSON, the chain hashing
// rules of ACS §8, and (later) wire types, the error registry and the
// signature algorithm registry.
//
// [RFC 8785]: https://www.rfc-editor.org/rfc/rfc8785
package acs
