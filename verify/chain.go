package verify

import (
	"fmt"

	"github.com/acsledger/acsledger/acs"
)

// A ChainVerifier replays one session's ContextEntries in chain order, one
// at a time, and reports where the chain does not hold together. It never
// trusts a stated entry_hash: it recomputes each one (ACS §8.2) and checks
// every link against the entry before it.
//
// It keeps no entry after Add returns. To name a fork, it remembers, for
// the last ForkWindow/2 to ForkWindow entries, the 32-byte parent hash each
// named and its own hash (about 150 bytes an entry, whatever the entry's
// size), so its memory is bounded whatever the chain's length. A second
// branch that names a parent further back than that is still reported, as
// a previous_hash_mismatch without the fork beside it.
//
// The zero value is ready to use. A ChainVerifier is not safe for concurrent
// use.
type ChainVerifier struct {
	n int // entries added so far

	// link is what the next entry's previous_hash must equal: the previous
	// entry's stated entry_hash, or its recomputed one when it stated none.
	// When the two differ (already reported as entry_hash_mismatch), alt is
	// the recomputed one and a link to either is accepted, so that one
	// edited entry does not also break the link after it, whether its
	// content or its entry_hash was edited.
	link, alt acs.Hash

	// head is the recomputed entry_hash of the last entry added.
	head acs.Hash

	// children maps each previous_hash seen to the first entry naming it,
	// in two generations of at most ForkWindow/2 parents each: when
	// children is full it becomes older and the generation before is
	// dropped whole. (Deleting parents one by one would leave a Go map
	// growing with tombstones.)
	children, older map[acs.Hash]child
}

// ForkWindow is how many entries back a ChainVerifier looks for the other
// branch of a fork.
const ForkWindow = 1 << 16

type child struct {
	index int
	hash  acs.Hash
}

// Add checks the next entry of the chain and returns what is wrong with it,
// or nil. It reports every problem it can see without letting one cause
// produce a string of findings: a dropped entry breaks only the link of the
// entry after the gap. An entry that forks from an earlier one is reported
// as previous_hash_mismatch (when it does not link to the entry before it)
// and, beside it, as fork.
func (v *ChainVerifier) Add(e *acs.Entry) []Finding {
	i := v.n
	v.n++
	var fs []Finding
	add := func(code, expected, actual, format string, args ...any) {
		fs = append(fs, Finding{
			Code:       code,
			EntryIndex: i,
			EntryID:    e.EntryID,
			StepID:     e.StepID,
			Expected:   expected,
			Actual:     actual,
			Message:    fmt.Sprintf(format, args...),
		})
	}

	// ACS §8.2: entry_hash = SHA-256(content_bytes || prev_hash_bytes), with
	// the entry's own previous_hash, so that an edit of the content or of
	// previous_hash shows here even when the link check below passes.
	recomputed := acs.EntryHash(e.Content, e.PreviousHash)
	stated := recomputed
	switch {
	case e.EntryHash == nil:
		add(CodeEntryHashMismatch, recomputed.String(), "",
			"The entry has no entry_hash; its content and previous_hash hash to %s.", recomputed)
	case *e.EntryHash != recomputed:
		stated = *e.EntryHash
		add(CodeEntryHashMismatch, recomputed.String(), stated.String(),
			"The entry's content and previous_hash hash to %s, not to its stated entry_hash %s.", recomputed, stated)
	}

	var first *child
	if e.PreviousHash != nil {
		if c, ok := v.lookup(*e.PreviousHash); ok {
			// The same entry listed twice is not two entries at one
			// position; its link check below reports it.
			if c.hash != stated {
				first = &c
			}
		} else {
			v.remember(*e.PreviousHash, child{index: i, hash: stated})
		}
	}

	// An entry that does not link to the one before it is reported as
	// previous_hash_mismatch, always, so a tool keyed on that code misses
	// no inserted entry; fork is added beside it, not instead.
	switch {
	case i == 0:
		// ACS §8: the root of a session's chain has previous_hash null,
		// and only the root may.
		if e.PreviousHash != nil {
			add(CodeRootHasPrevious, "", e.PreviousHash.String(),
				"The first entry has previous_hash %s where the root of a chain has null.", e.PreviousHash)
		}
	case e.PreviousHash == nil:
		add(CodePreviousHashMismatch, v.link.String(), "",
			"The entry has a null previous_hash, but it follows entry %d whose entry_hash is %s.", i-1, v.link)
	case *e.PreviousHash != v.link && *e.PreviousHash != v.alt:
		add(CodePreviousHashMismatch, v.link.String(), e.PreviousHash.String(),
			"The entry's previous_hash %s is not the entry_hash %s of entry %d before it.", e.PreviousHash, v.link, i-1)
	}
	if i > 0 && first != nil {
		add(CodeFork, first.hash.String(), stated.String(),
			"The entry names the same previous_hash %s as entry %d, so the chain has two different entries at one position.",
			e.PreviousHash, first.index)
	}

	v.link, v.alt = stated, recomputed
	v.head = recomputed
	return fs
}

// lookup returns the first entry remembered as naming parent.
func (v *ChainVerifier) lookup(parent acs.Hash) (child, bool) {
	if c, ok := v.children[parent]; ok {
		return c, true
	}
	c, ok := v.older[parent]
	return c, ok
}

// remember adds a parent to the fork index, starting a new generation
// when the current one is full.
func (v *ChainVerifier) remember(parent acs.Hash, c child) {
	if v.children == nil || len(v.children) >= ForkWindow/2 {
		v.older = v.children
		v.children = make(map[acs.Hash]child, min(ForkWindow/2, 1024+len(v.older)))
	}
	v.children[parent] = c
}

// Entries returns how many entries have been added.
func (v *ChainVerifier) Entries() int { return v.n }

// Head returns the recomputed entry_hash of the last entry added: the
// chain_hash the chain commits to (ACS §8). It is the zero Hash before the
// first entry.
func (v *ChainVerifier) Head() acs.Hash { return v.head }
