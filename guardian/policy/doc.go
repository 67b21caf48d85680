// Package policy is the Guardian's deterministic policy layer (ACS §12.1):
// versioned bundles of Rego modules evaluated in-process with [Open Policy
// Agent], decisions carrying the policy references and evidence needed to
// replay them, hot reload of new bundle versions, and the shipped baseline
// bundle.
//
// A bundle is recorded in the ledger (ledger.PolicyBundleStore.PutPolicyBundle)
// before any decision cites it, under a digest an auditor can recompute from
// its canonical encoding ([RFC 8785] JSON); docs/policy.md specifies that
// encoding, the contract of the decision rule data.acs.decision, and the
// baseline's rules and reason codes.
//
// [Open Policy Agent]: https://www.openpolicyagent.org/docs/policy-language
// [RFC 8785]: https://www.rfc-editor.org/rfc/rfc8785
package policy
