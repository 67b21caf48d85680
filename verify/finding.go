package verify

import "fmt"

// Finding codes. They are part of acsledger's contract with auditors and
// their tools: a code is never renamed or reused for another meaning. Each is
// described, with its usual cause, in docs/findings.md.
const (
	// CodeEntryHashMismatch: the entry's content and its own previous_hash
	// do not hash to its stated entry_hash.
	CodeEntryHashMismatch = "entry_hash_mismatch"

	// CodePreviousHashMismatch: the entry's previous_hash does not name the
	// entry before it in the input.
	CodePreviousHashMismatch = "previous_hash_mismatch"

	// CodeRootHasPrevious: the first entry has a non-null previous_hash.
	CodeRootHasPrevious = "root_has_previous"

	// CodeFork: the entry names the same parent as an earlier entry of the
	// input, so the chain has two different entries at one position.
	CodeFork = "fork"

	// CodeChainMismatch: a signed response published a chain_hash for the
	// entry's step that is not the head the chain recomputes there.
	CodeChainMismatch = "chain_mismatch"

	// CodeResponseSignatureInvalid: a response's signature does not verify
	// against the trusted keys.
	CodeResponseSignatureInvalid = "response_signature_invalid"

	// CodeResponseWithoutEntry: a signed response published a head for a
	// request_id that no entry has as its step_id.
	CodeResponseWithoutEntry = "response_without_entry"

	// CodeEntryWithoutResponse: a content-bearing entry has no signed
	// response publishing its head.
	CodeEntryWithoutResponse = "entry_without_response"

	// CodeHeadUnauthenticated: with RequireSignedHeads, entries that no
	// head signed by a trusted asymmetric key binds (ACS §8.6: an HMAC
	// head does not show a third party who issued it).
	CodeHeadUnauthenticated = "head_unauthenticated"

	// CodeUnverifiableHMAC (a notice, not a failure): a response is
	// HMAC-signed and its key's secret was not given.
	CodeUnverifiableHMAC = "unverifiable_hmac"

	// CodeCheckpointSignatureInvalid: a checkpoint lacks a valid signature
	// by a trusted log key.
	CodeCheckpointSignatureInvalid = "checkpoint_signature_invalid"

	// CodeWitnessQuorumNotMet: a checkpoint has valid cosignatures from
	// fewer trusted witnesses than the k-of-n policy needs.
	CodeWitnessQuorumNotMet = "witness_quorum_not_met"

	// CodeNotAnchored: no inclusion proof ties the entry, or any entry
	// after it, to a checkpoint.
	CodeNotAnchored = "not_anchored"

	// CodeInclusionProofInvalid: an inclusion proof does not lead from the
	// entry's leaf to its checkpoint's root.
	CodeInclusionProofInvalid = "inclusion_proof_invalid"

	// CodeAnchorWithoutEntry: an anchor names a position past the chain's
	// last entry: the log holds entries the evidence does not.
	CodeAnchorWithoutEntry = "anchor_without_entry"

	// CodeConsistencyProofInvalid: two checkpoints are not proven
	// consistent: the log was rewritten or forked between them.
	CodeConsistencyProofInvalid = "consistency_proof_invalid"

	// CodeLoggedEntryMissing: the Merkle log holds a leaf for the session
	// at a position where the store has no entry (found online only: the
	// log's leaves are not in a bundle).
	CodeLoggedEntryMissing = "logged_entry_missing"

	// CodeLoggedEntryMismatch: the Merkle log holds a leaf for the session
	// at a position whose stored entry has another entry_hash.
	CodeLoggedEntryMismatch = "logged_entry_mismatch"

	// CodeTruncated: the session is shorter than the evidence says it was:
	// the log holds a leaf past its last entry, or an earlier bundle of the
	// session has more entries than a later one.
	CodeTruncated = "truncated"

	// CodeRewritten: a later bundle of a session does not have the entries
	// of an earlier one as its prefix.
	CodeRewritten = "rewritten"

	// CodeLogFork: a later bundle's checkpoints are not shown to extend an
	// earlier bundle's checkpoint: same size with another root, a smaller
	// log, or no checkpoint of the earlier size to prove consistency from.
	CodeLogFork = "log_fork"

	// CodePolicyUnresolved: a decision cites a policy bundle version the
	// evidence does not record.
	CodePolicyUnresolved = "policy_unresolved"

	// CodePolicyRecordedAfterDecision: a decision cites a policy bundle
	// version recorded only after the decision was made.
	CodePolicyRecordedAfterDecision = "policy_recorded_after_decision"

	// CodePolicyDigestMismatch: a policy bundle's content does not hash to
	// its recorded digest.
	CodePolicyDigestMismatch = "policy_digest_mismatch"

	// CodeKeysFromBundle (a notice): no trusted key was given for some
	// signatures, so the keys the bundle carries were used; this shows
	// the evidence is consistent, not who made it.
	CodeKeysFromBundle = "keys_from_bundle"

	// CodeReceiptSessionMismatch: a receipt's entry names another session
	// than the receipt's session_id.
	CodeReceiptSessionMismatch = "receipt_session_mismatch"

	// CodeReceiptPolicyMismatch: a receipt's policy_references are not
	// the policy versions its entry's decision cites.
	CodeReceiptPolicyMismatch = "receipt_policy_mismatch"

	// CodeCOSESignatureInvalid: a COSE receipt's signature (over the root
	// its inclusion path leads to) or its statement's signature does not
	// verify under a trusted log key, or names a key not trusted.
	CodeCOSESignatureInvalid = "cose_signature_invalid"

	// CodeResponseNotChecked (a notice): a receipt's signed response was
	// not checked, since no response key was given.
	CodeResponseNotChecked = "response_not_checked"

	// CodeHeadsNotChecked (a notice): a bundle has no "responses" member,
	// so no published chain head was checked.
	CodeHeadsNotChecked = "heads_not_checked"

	// CodePayloadMissing: a payload the entry commits to (an ingested
	// record's source by source_sha256, a Guardian step's params by
	// request_hash) is gone without a record of its erasure.
	CodePayloadMissing = "payload_missing"

	// CodePayloadMismatch: a payload carried beside an entry does not
	// hash to the entry's commitment.
	CodePayloadMismatch = "payload_mismatch"

	// CodePayloadErased (a notice): a payload was erased; the notice
	// carries the erasure's record (who, when, why).
	CodePayloadErased = "payload_erased"

	// CodeSourceInline (a notice): entries hold their source record
	// inline, as ingest wrote them before source records were kept
	// beside the entry.
	CodeSourceInline = "source_inline"
)

// A Finding is one place where the evidence does not verify. Expected and
// Actual are lowercase hex hashes, or "" for a null or absent member; what
// each one means depends on Code and is documented in docs/findings.md.
type Finding struct {
	Code       string `json:"code"`
	EntryIndex int    `json:"entry_index"` // 0-based position in the input
	EntryID    string `json:"entry_id"`
	StepID     string `json:"step_id"`
	Expected   string `json:"expected"`
	Actual     string `json:"actual"`
	Message    string `json:"message"` // one plain sentence
	// Where names the evidence the finding is about when it is not an
	// entry (EntryIndex is then -1): "response 3 (line 4)", "checkpoint 0",
	// "anchor 1".
	Where string `json:"where,omitempty"`
	// Erasure is the erasure's record, on a payload_erased notice.
	Erasure *PayloadErasure `json:"erasure,omitempty"`
}

// Error makes a Finding usable where an error is wanted, for example when a
// caller stops at the first problem.
func (f Finding) Error() string {
	if f.EntryIndex < 0 {
		return fmt.Sprintf("%s: %s: %s", f.Where, f.Code, f.Message)
	}
	return fmt.Sprintf("entry %d (entry_id %q): %s: %s", f.EntryIndex, f.EntryID, f.Code, f.Message)
}
