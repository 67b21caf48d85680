package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/acsledger/acsledger/ledger"
)

// ExportTarget is a store under the export suite: it appends entries and
// reads them back in the Merkle log's order.
type ExportTarget interface {
	Append(ctx context.Context, r ledger.Record) (ledger.Appended, error)
	ledger.ExportStore
}

// RunExport is the conformance suite of ledger.ExportStore. integrate
// gives every appended entry its Merkle leaf (the log's integrator, run to
// the end); exec runs one SQL statement bypassing the store, to show that
// a cursor cannot move back.
func RunExport(t *testing.T, s ExportTarget, integrate func(t *testing.T), exec func(stmt string) error) {
	ctx := context.Background()
	fx := Fixtures(t)
	type want struct {
		session, agent string
		position       int64
		a              ledger.Appended
	}
	var wants []want
	appendTo := func(session, agent string, n int) {
		for i := range n {
			a, err := s.Append(ctx, ledger.Record{SessionID: session, AgentID: agent, Entry: fx[i%len(fx)]})
			if err != nil {
				t.Fatal(err)
			}
			wants = append(wants, want{session, agent, int64(i), a})
		}
	}
	appendTo("sess-export-a", "team-a/bot", 3)
	appendTo("sess-export-b", "team-b/bot", 2)
	integrate(t)

	size, err := s.LogSize(ctx)
	if err != nil || size != 5 {
		t.Fatalf("LogSize = %d, %v; want 5", size, err)
	}
	all, err := s.ExportEntries(ctx, ledger.ExportFilter{From: 0, To: size})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 5 {
		t.Fatalf("ExportEntries(all) = %d entries, want 5", len(all))
	}
	// One session's entries integrate in order; both sessions' leaves
	// are the whole range, each once.
	seen := map[string]bool{}
	for i, e := range all {
		if e.LeafIndex != uint64(i) {
			t.Errorf("entry %d has leaf %d", i, e.LeafIndex)
		}
		var w *want
		for j := range wants {
			if wants[j].session == e.SessionID && wants[j].position == e.Position {
				w = &wants[j]
			}
		}
		if w == nil {
			t.Fatalf("leaf %d: session %q position %d was not appended", i, e.SessionID, e.Position)
		}
		if e.EntryHash != w.a.EntryHash || e.AgentID != w.agent || e.Source == "" || e.RecordedAt.IsZero() {
			t.Errorf("leaf %d = %+v; want hash %s agent %s, a source and a time", i, e, w.a.EntryHash, w.agent)
		}
		if !bytes.Contains(e.Content, []byte(`"step_type"`)) || e.Response != nil || e.Params != nil {
			t.Errorf("leaf %d: content %.60q, response %q, params %q", i, e.Content, e.Response, e.Params)
		}
		key := fmt.Sprintf("%s/%d", e.SessionID, e.Position)
		if seen[key] {
			t.Errorf("leaf %d repeats %s/%d", i, e.SessionID, e.Position)
		}
		seen[key] = true
	}
	page, err := s.ExportEntries(ctx, ledger.ExportFilter{From: 1, To: size, Limit: 2})
	if err != nil || len(page) != 2 || page[0].LeafIndex != 1 || page[1].LeafIndex != 2 {
		t.Errorf("page from 1, limit 2 = %d entries, %v", len(page), err)
	}
	page, err = s.ExportEntries(ctx, ledger.ExportFilter{From: 0, To: 3})
	if err != nil || len(page) != 3 {
		t.Errorf("range [0, 3) = %d entries, %v", len(page), err)
	}
	page, err = s.ExportEntries(ctx, ledger.ExportFilter{From: 0, To: size, AgentPrefix: "team-b/"})
	if err != nil || len(page) != 2 || page[0].AgentID != "team-b/bot" || page[1].AgentID != "team-b/bot" {
		t.Errorf("scope team-b/ = %+v, %v", page, err)
	}
	if page, err := s.ExportEntries(ctx, ledger.ExportFilter{From: 0, To: size, AgentPrefix: "team-b/bot2"}); err != nil || len(page) != 0 {
		t.Errorf("scope with no agent = %d entries, %v", len(page), err)
	}
	if page, err := s.ExportEntries(ctx, ledger.ExportFilter{From: 5, To: 9}); err != nil || len(page) != 0 {
		t.Errorf("past the end = %d entries, %v", len(page), err)
	}

	// Cursors.
	if _, err := s.ExportCursor(ctx, "siem"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("unknown cursor: %v, want ErrNotFound", err)
	}
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	c := ledger.ExportCursor{Name: "siem", Next: 0, SentTo: 3, UpdatedAt: now}
	if err := s.PutExportCursor(ctx, c, 0); err != nil {
		t.Fatal(err)
	}
	c = ledger.ExportCursor{Name: "siem", Next: 3, SentTo: 5, Acknowledged: 3, SentUnconfirmed: 2, Resent: 1, UpdatedAt: now.Add(time.Second)}
	if err := s.PutExportCursor(ctx, c, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.PutExportCursor(ctx, ledger.ExportCursor{Name: "siem", Next: 4, SentTo: 4, Acknowledged: 4, UpdatedAt: now}, 0); !errors.Is(err, ledger.ErrCursorMoved) {
		t.Errorf("stale compare-and-swap: %v, want ErrCursorMoved", err)
	}
	if err := s.PutExportCursor(ctx, ledger.ExportCursor{Name: "siem", Next: 5, SentTo: 4, UpdatedAt: now}, 3); err == nil {
		t.Error("a cursor sent to a leaf before its next was saved")
	}
	got, err := s.ExportCursor(ctx, "siem")
	if err != nil || got != c {
		t.Errorf("ExportCursor = %+v, %v; want %+v", got, err, c)
	}
	if err := s.PutExportCursor(ctx, ledger.ExportCursor{Name: "archive", UpdatedAt: now}, 0); err != nil {
		t.Fatal(err)
	}
	list, err := s.ExportCursors(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "archive" || list[1] != c {
		t.Errorf("ExportCursors = %+v, %v", list, err)
	}
	if err := exec(`UPDATE export_cursors SET next_leaf = 1, sending_to = 1 WHERE name = 'siem'`); err == nil {
		t.Error("a cursor moved back")
	}
	for _, set := range []string{"sending_to = 4", "sent_unconfirmed = 1"} {
		if err := exec(`UPDATE export_cursors SET ` + set + ` WHERE name = 'siem'`); err == nil {
			t.Errorf("SET %s: moved back", set)
		}
	}
}
