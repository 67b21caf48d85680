package verify

import (
	"encoding/hex"
	"fmt"
	"io"

	"github.com/acsledger/acsledger/acs"
)

// VerifyBundleSince is VerifyBundle for a later bundle of the session of
// an earlier one, whose report (from VerifyBundle) is earlier: beside every
// check of VerifyBundle, it checks that the later bundle extends the
// earlier one.
//
//   - The chain: the later bundle has at least as many entries (else
//     truncated), and its entry at the earlier bundle's last position has
//     the earlier head (else rewritten). The entries are hash-linked, so
//     one equal head means an equal prefix.
//   - The log: the later bundle carries a checkpoint of the earlier
//     checkpoint's size with the same root, and VerifyBundle's own rule
//     (a consistency proof between successive checkpoint sizes) proves
//     its latest checkpoint extends it. A root that differs, a smaller
//     log, or no checkpoint of that size is log_fork: nothing shows the
//     log the later bundle is anchored in extends the earlier one.
//     `acsledger export --since-size N` writes such a bundle.
//
// A later bundle of another session is an *InputError.
func VerifyBundleSince(r io.Reader, trust *Trust, earlier *Report) (*Report, error) {
	return verifyBundle(r, trust, earlier, Limits{})
}

// checkSinceEntry compares the head at the earlier bundle's last position.
func (s *bundleState) checkSinceEntry(i int, e *acs.Entry, head acs.Hash) []Finding {
	if s.since == nil || i != s.since.Entries-1 || head == s.since.Head {
		return nil
	}
	return []Finding{{Code: CodeRewritten, EntryIndex: i, EntryID: e.EntryID, StepID: e.StepID,
		Expected: s.since.Head.String(), Actual: head.String(),
		Message: fmt.Sprintf("The earlier bundle's chain ends at entry %d with head %s, but this bundle's chain has head %s there: entries up to %d were rewritten.", i, s.since.Head, head, i)}}
}

// finishSince adds the findings of the comparison that only the end of
// the later bundle shows.
func (s *bundleState) finishSince() []Finding {
	if s.since == nil {
		return nil
	}
	var fs []Finding
	if n := s.chain.Entries(); n < s.since.Entries {
		fs = append(fs, Finding{Code: CodeTruncated, EntryIndex: -1, Where: "entries",
			Expected: fmt.Sprintf("at least %d entries", s.since.Entries), Actual: fmt.Sprintf("%d entries", n),
			Message: fmt.Sprintf("The earlier bundle has %d entries and this one only %d: the session's tail was cut off.", s.since.Entries, n)})
	}
	old := s.since.Checkpoint
	if old == nil {
		return fs
	}
	oldRoot := hex.EncodeToString(old.Root[:])
	var largest uint64
	for _, cp := range s.checkpoints {
		largest = max(largest, cp.Size)
	}
	j, ok := s.bySize[old.Size]
	switch {
	case ok && s.checkpoints[j].Root != old.Root:
		fs = append(fs, Finding{Code: CodeLogFork, EntryIndex: -1, Where: fmt.Sprintf("checkpoints[%d]", j),
			Expected: oldRoot, Actual: hex.EncodeToString(s.checkpoints[j].Root[:]),
			Message: fmt.Sprintf("The earlier bundle's checkpoint of size %d and this bundle's have different roots: the log was forked.", old.Size)})
	case ok:
		// Consistent with the earlier checkpoint; the proof from it to the
		// later ones is checked with the bundle's own checkpoints.
	case largest < old.Size:
		fs = append(fs, Finding{Code: CodeLogFork, EntryIndex: -1, Where: "checkpoints",
			Expected: fmt.Sprintf("a log of at least %d leaves", old.Size), Actual: fmt.Sprintf("%d leaves", largest),
			Message: fmt.Sprintf("The earlier bundle's log had %d leaves and this bundle's has %d: the log went back.", old.Size, largest)})
	default:
		fs = append(fs, Finding{Code: CodeLogFork, EntryIndex: -1, Where: "checkpoints",
			Expected: fmt.Sprintf("the checkpoint of size %d with root %s and a consistency proof from it", old.Size, oldRoot), Actual: "",
			Message: fmt.Sprintf("This bundle has no checkpoint of the earlier bundle's size %d, so nothing shows its log extends the earlier one (export it with --since-size %d).", old.Size, old.Size)})
	}
	return fs
}
