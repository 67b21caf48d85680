package evidence

import (
	"context"
	"fmt"
	"iter"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/verify"
)

// maxLogFindings bounds the logged_entry_missing and logged_entry_mismatch
// findings of one session: a session whose every entry was replaced would
// otherwise give one finding per entry.
const maxLogFindings = 100

// checkLog holds a session against the Merkle log: every leaf the log
// holds for it must name an entry the store has, with the leaf's
// entry_hash, and the session must be at least as long as its highest
// logged position + 1. A superuser who deletes a session's tail and moves
// its head back leaves a chain that verifies on its own; its leaves stay.
//
// The leaves are read before the session's length, so that an entry
// appended meanwhile (its leaf written after its commit) cannot look like a
// cut: every leaf read names an entry committed before the length is read.
func checkLog(ctx context.Context, store ledger.ChainReader, log Log, sessionID string) ([]verify.Finding, error) {
	var fs []verify.Finding
	entries, stop := iter.Pull2(ledger.AllEntries(ctx, store, sessionID))
	defer stop()
	var cur *ledger.Entry // the entry the merge is at, nil past the end
	advance := func() error {
		e, err, ok := entries()
		switch {
		case !ok:
			cur = nil
		case err != nil:
			return err
		default:
			cur = &e
		}
		return nil
	}
	if err := advance(); err != nil {
		return nil, fmt.Errorf("couldn't read session %s: %w", sessionID, err)
	}
	var highest int64 = -1
	var missing []tlog.LoggedLeaf
	dropped := 0
	for ll, err := range log.SessionLeaves(ctx, sessionID) {
		if err != nil {
			return nil, fmt.Errorf("couldn't read the log's leaves of session %s: %w", sessionID, err)
		}
		highest = max(highest, ll.Position)
		// Leaves follow chain order, so the merge only moves forward;
		// a leaf out of order is looked up on its own.
		e, err := entryAt(ctx, store, sessionID, ll.Position, &cur, advance)
		if err != nil {
			return nil, err
		}
		switch {
		case e == nil:
			if len(missing) < maxLogFindings {
				missing = append(missing, ll)
			} else {
				dropped++
			}
		case e.EntryHash != ll.EntryHash:
			if len(fs) < maxLogFindings {
				fs = append(fs, verify.Finding{Code: verify.CodeLoggedEntryMismatch, EntryIndex: int(ll.Position), EntryID: e.EntryID, StepID: e.StepID,
					Expected: fmt.Sprintf("%x", ll.EntryHash), Actual: e.EntryHash.String(), Where: fmt.Sprintf("log leaf %d", ll.Index),
					Message: fmt.Sprintf("The Merkle log's leaf %d commits to entry_hash %x at position %d, but the store holds an entry with entry_hash %s there: the entry was replaced after it was logged.", ll.Index, ll.EntryHash, ll.Position, e.EntryHash)})
			} else {
				dropped++
			}
		}
	}
	if highest < 0 {
		return fs, nil
	}
	sess, err := store.Session(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("couldn't load session %s: %w", sessionID, err)
	}
	for _, ll := range missing {
		if ll.Position >= sess.Length {
			continue // reported once below, as the cut
		}
		fs = append(fs, verify.Finding{Code: verify.CodeLoggedEntryMissing, EntryIndex: int(ll.Position),
			Expected: fmt.Sprintf("%x", ll.EntryHash), Where: fmt.Sprintf("log leaf %d", ll.Index),
			Message: fmt.Sprintf("The Merkle log's leaf %d commits to an entry at position %d with entry_hash %x, which the store does not hold: it was deleted after it was logged.", ll.Index, ll.Position, ll.EntryHash)})
	}
	if highest >= sess.Length {
		fs = append(fs, verify.Finding{Code: verify.CodeTruncated, EntryIndex: -1, Where: "session " + sessionID,
			Expected: fmt.Sprintf("at least %d entries", highest+1), Actual: fmt.Sprintf("%d entries", sess.Length),
			Message: fmt.Sprintf("The Merkle log holds leaves of this session up to position %d, but the store holds only %d entries: its tail was deleted after it was logged.", highest, sess.Length)})
	}
	if dropped > 0 {
		fs = append(fs, verify.Finding{Code: verify.CodeLoggedEntryMissing, EntryIndex: -1, Where: "session " + sessionID,
			Message: fmt.Sprintf("%d more logged leaves of this session have no matching entry; only the first %d are listed.", dropped, maxLogFindings)})
	}
	return fs, nil
}

// entryAt returns the entry at position pos, or nil when the store has
// none, moving the merge's cursor forward to it when it is ahead.
func entryAt(ctx context.Context, store ledger.ChainReader, sessionID string, pos int64, cur **ledger.Entry, advance func() error) (*ledger.Entry, error) {
	if *cur != nil && (*cur).Position > pos {
		page, err := store.Entries(ctx, sessionID, pos, 1)
		if err != nil {
			return nil, fmt.Errorf("couldn't read session %s at position %d: %w", sessionID, pos, err)
		}
		if len(page) == 1 && page[0].Position == pos {
			return &page[0], nil
		}
		return nil, nil
	}
	for *cur != nil && (*cur).Position < pos {
		if err := advance(); err != nil {
			return nil, fmt.Errorf("couldn't read session %s: %w", sessionID, err)
		}
	}
	if *cur != nil && (*cur).Position == pos {
		return *cur, nil
	}
	return nil, nil
}
