// Package policy is the Guardian's deterministic policy layer (ACS §12.1):
// versioned bundles of Rego modules evaluated in-process with Open Policy
// Agent, decisions carrying the policy references and evidence needed to
// replay them, hot reload of new bundle versions, and the shipped baseline
// bundle.
//
// A bundle is recorded in the ledger (ledger.GuardianStore.PutPolicyBundle)
// before any decision cites it, under a digest an auditor can recompute from
// its canonical encoding; docs/policy.md specifies that encoding and the
// contract of the decision rule.
//
// [ACS §12.1]: ../../../shared/spec/seeds/acs-instrument-specification-v0.1.0.txt
// [Open Policy Agent]: https://www.openpolicyagent.org/docs/policy-language
package policy
