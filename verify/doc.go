// Package verify holds acsledger's pure checks: functions over bytes, hashes
// and keys that an auditor can run offline, with no database, no network and
// no clock. It imports only package acs.
//
// This first part replays ContextEntry hash chains (ACS §8.2) and reports
// every place where a chain does not hold together as a [Finding] with a
// stable code. Codes are documented in docs/findings.md and never renamed.
//
// A chain check alone cannot see a history that was rewritten and re-hashed
// forward from some entry: such a chain is internally consistent. Catching it
// needs the chain heads the Guardian published and signed as it went
// (ACS §8.6), which later checks in this package consume.
package verify
