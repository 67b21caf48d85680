// Package guardian is acsledger's ACS Guardian: the policy enforcement point
// an Observed Agent talks to over JSON-RPC 2.0 (HTTP POST /acs, or stdio with
// Content-Length framing), as ACS v0.1.0 §3-§17 define it.
//
// For every request it validates the envelope and the method's payload
// against the official schemas, checks the signature (§10), the timestamp
// window and request_id/nonce replay (§10.3), asks a Policy for a decision,
// enforces the disposition rules (§6, §6.3, §9.2), appends the step's
// ContextEntry to the session's chain in the ledger (§8) and answers with a
// signed decision that publishes the new chain head (§8.6). The entry and the
// signed answer are stored in one transaction before the answer leaves.
//
// Choices where ACS is silent are listed in docs/guardian.md; the spec's MUST
// sentences and the tests that cover them are in docs/conformance.md.
//
// [ACS]: https://github.com/GenAI-Security-Project/agent-control-standard
package guardian
