// Package export reads the ledger as events for other tools and delivers
// them to sinks through durable cursors (docs/export.md). The ledger is
// the backlog: a sink that is down only lags, nothing is buffered beyond
// one batch, and a sink's cursor moves only after the sink took a batch,
// so delivery is at least once, in the Merkle log's order, with the entry
// hash (in every event's evidence handle) as the idempotency key.
//
// The encodings are acs/trace's; the network sinks are
// internal/exportsink's; the pull API is web/export's.
package export

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/acsledger/acsledger/acs/trace"
	"github.com/acsledger/acsledger/ledger"
)

// Store is the ledger as export reads it and keeps its cursors.
type Store = ledger.ExportStore

// Event is one encoded event and where it is.
type Event struct {
	// Cursor is the event's wire cursor (Cursor's doc).
	Cursor string
	// Next is where to resume after this event.
	Next Cursor
	// JSON is the event, one JSON object without a newline.
	JSON []byte
	// SessionID, Position and EntryHash (lowercase hex) name the entry;
	// the hash is the idempotency key a receiver deduplicates on.
	SessionID string
	Position  int64
	EntryHash string
	// RecordedAt is when the ledger committed the entry.
	RecordedAt time.Time
}

// Encoder turns ledger entries into events.
type Encoder struct {
	Format  trace.Format
	Options trace.Options
	// Origin is the ledger's log origin (the CloudEvents source).
	Origin string
}

// Events returns the events of e in order.
func (en Encoder) Events(e ledger.ExportEntry) ([]Event, error) {
	leaf := e.LeafIndex
	ev := trace.Evidence{
		Origin: en.Origin, SessionID: e.SessionID, AgentID: e.AgentID, Position: e.Position,
		EntryHash: hex.EncodeToString(e.EntryHash[:]), LeafIndex: &leaf, Source: e.Source,
		Entry: e.Content, Response: e.Response, Committed: e.RecordedAt,
	}
	if en.Options.AllowTools || len(en.Options.AllowArgKeys) > 0 {
		ev.Params = e.Params
	}
	js, err := trace.EncodeAll(en.Format, ev, en.Options)
	if err != nil {
		return nil, fmt.Errorf("couldn't encode leaf %d (session %q position %d): %w", leaf, e.SessionID, e.Position, err)
	}
	out := make([]Event, len(js))
	for i, j := range js {
		next := Cursor{Leaf: leaf, Skip: i + 1}
		if i == len(js)-1 {
			next = Cursor{Leaf: leaf + 1}
		}
		out[i] = Event{Cursor: lineCursor(leaf, i, len(js)), Next: next, JSON: j,
			SessionID: e.SessionID, Position: e.Position, EntryHash: ev.EntryHash, RecordedAt: e.RecordedAt}
	}
	return out, nil
}

// wantsParams reports whether the encoder lets anything of the params out.
func (en Encoder) wantsParams() bool {
	return en.Options.AllowTools || len(en.Options.AllowArgKeys) > 0
}

// Page is what Read returns.
type Page struct {
	Events []Event
	// Next is where the next Read resumes: after the last event, or past
	// the leaves scanned without an event in scope.
	Next Cursor
	// Size is the log's size when the page was read; Next.Leaf == Size
	// with Next.Skip == 0 means the reader is at the end.
	Size uint64
}

// AtEnd reports whether p reached the end of the log as it was read.
func (p Page) AtEnd() bool { return p.Next.Skip == 0 && p.Next.Leaf >= p.Size }

// Scan bounds the work of one Read: at most MaxLeaves leaves are scanned,
// however few of them a scope keeps.
const MaxLeaves = 20000

// Read returns up to limit events from after, of agents whose id starts
// with scope ("" for all). It reads at most MaxLeaves leaves, so a scoped
// page can be empty without being at the end (Page.AtEnd tells).
func Read(ctx context.Context, st Store, en Encoder, after Cursor, limit int, scope string) (Page, error) {
	size, err := st.LogSize(ctx)
	if err != nil {
		return Page{}, err
	}
	p := Page{Next: after, Size: size}
	if limit <= 0 {
		return p, nil
	}
	for p.Next.Leaf < size && len(p.Events) < limit {
		from := p.Next.Leaf
		to := min(size, from+MaxLeaves)
		// Each entry has at most two events: a page of entries that can
		// fill limit events, plus the partly read entry.
		want := limit - len(p.Events) + 1
		es, err := st.ExportEntries(ctx, ledger.ExportFilter{From: from, To: to, AgentPrefix: scope, Limit: want, WithParams: en.wantsParams()})
		if err != nil {
			return p, err
		}
		for _, e := range es {
			evs, err := en.Events(e)
			if err != nil {
				return p, err
			}
			if e.LeafIndex == p.Next.Leaf && p.Next.Skip > 0 {
				evs = evs[min(p.Next.Skip, len(evs)):]
			}
			for _, ev := range evs {
				if len(p.Events) == limit {
					return p, nil
				}
				p.Events = append(p.Events, ev)
				p.Next = ev.Next
			}
		}
		if len(es) < want {
			// The range holds no more entries in scope.
			p.Next = Cursor{Leaf: to}
		}
		if to-from >= MaxLeaves {
			break
		}
	}
	return p, nil
}
