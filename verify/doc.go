// Package verify holds acsledger's pure checks: functions over bytes, hashes,
// keys and proofs that an auditor can run offline, with no database, no
// network and no clock. It imports the acs packages (canonical JSON, chain
// hashing, signatures) and the transparency-log libraries it checks notes
// and proofs with, nothing that reaches storage.
//
// Every problem is reported as a [Finding] with a stable code, documented in
// docs/findings.md and never renamed; things worth knowing that are not
// failures are notices of the same shape. The checks, from the smallest:
//
//   - [ChainVerifier] and [VerifyChain] replay a session's ContextEntry hash
//     chain (ACS §8.2): entry hashes, links, forks.
//   - [HeadChecker] and [VerifyChainHeads] check the chain heads the Guardian
//     published in its signed responses (ACS §8.6). A chain rewritten and
//     re-hashed forward is internally consistent; only these expose it.
//     [HeadChecker.RequireSignedHeads] (and [Trust].RequireSignedHeads)
//     accepts only heads signed by the verifier's asymmetric keys, what a
//     third party needs: an HMAC head does not show who issued it.
//   - [VerifyCheckpoint] checks a C2SP tlog-checkpoint note against the log's
//     keys and a k-of-n witness policy; [LeafHash], [VerifyInclusion] and
//     [VerifyConsistency] are the RFC 6962 pieces that anchor a chain in the
//     Merkle log.
//   - [VerifyBundle] checks a whole evidence bundle (docs/evidence-bundle.md)
//     in one pass: all of the above, and the policy bundle versions every
//     decision cites.
//
// Input that cannot be read or parsed is an [*InputError], never a finding:
// nothing past it was verified.
package verify
