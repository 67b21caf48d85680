package acs

// Entry is a ContextEntry (ACS §8.1) parsed strictly and split into the part
// the chain commits to and the chain links themselves.
type Entry struct {
	// Content is the UTF-8 RFC 8785 form of the entry with its top-level
	// entry_hash and previous_hash members removed: the content_bytes of
	// ACS §8.2. Every other member is kept, so an absent member and a null
	// one hash differently.
	Content []byte

	// Required members (ACS §8.1), copied out for indexing.
	EntryID  string
	StepID   string
	StepType string

	// Timestamp is the entry's timestamp member, or "" when absent.
	Timestamp string

	// EntryHash and PreviousHash are the submitted chain links, nil when the
	// member is absent or null. They are never trusted: the ledger and the
	// verifier recompute and compare.
	EntryHash    *Hash
	PreviousHash *Hash
}
