package export_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs/trace"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/export"
	"github.com/acsledger/acsledger/ledger/export/exporttest"
)

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		wire string
		want export.Cursor
	}{
		{"", export.Cursor{}},
		{"0", export.Cursor{Leaf: 1}},
		{"41", export.Cursor{Leaf: 42}},
		{"41.0", export.Cursor{Leaf: 41, Skip: 1}},
	} {
		got, err := export.ParseAfter(tc.wire)
		if err != nil || got != tc.want {
			t.Errorf("ParseAfter(%q) = %+v, %v; want %+v", tc.wire, got, err, tc.want)
		}
		if got.String() != tc.wire {
			t.Errorf("%+v.String() = %q, want %q", got, got.String(), tc.wire)
		}
	}
	for _, bad := range []string{"-1", "x", "01", "1.", "1.x", "1.16", "1.-1", " 1", "1e3", "99999999999999999999"} {
		if _, err := export.ParseAfter(bad); err == nil || !strings.Contains(err.Error(), "cursor") {
			t.Errorf("ParseAfter(%q) = %v, want a cursor error", bad, err)
		}
	}
}

// eventHash is the entry hash of an OCSF or CloudEvents event.
func eventHash(t *testing.T, js []byte) string {
	t.Helper()
	var ev struct {
		Unmapped struct {
			Acsledger struct {
				EntryHash string `json:"entry_hash"`
			} `json:"acsledger"`
		} `json:"unmapped"`
		ID string `json:"id"`
	}
	if err := json.Unmarshal(js, &ev); err != nil {
		t.Fatalf("event %s: %v", js, err)
	}
	if ev.ID != "" {
		return ev.ID
	}
	return ev.Unmapped.Acsledger.EntryHash
}

// Reading page by page from every cursor returns the whole log once, in
// order: the OCSF step events, each deny followed by its Detection
// Finding.
func TestReadResumesExactly(t *testing.T) {
	t.Parallel()
	l := exporttest.New(t)
	l.Append(t, 23)
	ctx := context.Background()
	en := export.Encoder{Format: trace.OCSF, Origin: "test.example/log"}
	all, err := export.Read(ctx, l, en, export.Cursor{}, 1000, "")
	if err != nil {
		t.Fatal(err)
	}
	// 23 entries, 4 of them denies (i%5 == 4): 27 events.
	if len(all.Events) != 27 || !all.AtEnd() {
		t.Fatalf("whole log: %d events, at end %v; want 27, true", len(all.Events), all.AtEnd())
	}
	hashes := map[string]int{}
	for _, ev := range all.Events {
		if got := eventHash(t, ev.JSON); got != ev.EntryHash {
			t.Fatalf("event %s carries entry hash %s, its entry is %s", ev.Cursor, got, ev.EntryHash)
		}
		hashes[ev.EntryHash]++
	}
	for i, h := range l.Hashes {
		want := 1
		if i%5 == 4 {
			want = 2
		}
		if hashes[h] != want {
			t.Errorf("entry %d (%s): %d events, want %d", i, h, hashes[h], want)
		}
	}
	if all.Events[4].Cursor != "4.0" || all.Events[5].Cursor != "4" || all.Events[6].Cursor != "5" {
		t.Errorf("cursors around the first deny: %s %s %s", all.Events[4].Cursor, all.Events[5].Cursor, all.Events[6].Cursor)
	}
	for size := 1; size <= 4; size++ {
		var got []string
		after := ""
		for range 100 {
			c, err := export.ParseAfter(after)
			if err != nil {
				t.Fatal(err)
			}
			p, err := export.Read(ctx, l, en, c, size, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range p.Events {
				got = append(got, ev.Cursor)
				after = ev.Cursor
			}
			if p.AtEnd() {
				break
			}
		}
		if len(got) != len(all.Events) {
			t.Fatalf("pages of %d: %d events, want %d", size, len(got), len(all.Events))
		}
		for i := range got {
			if got[i] != all.Events[i].Cursor {
				t.Fatalf("pages of %d: event %d has cursor %s, want %s", size, i, got[i], all.Events[i].Cursor)
			}
		}
	}
	scoped, err := export.Read(ctx, l, export.Encoder{Format: trace.CloudEvents}, export.Cursor{}, 1000, "team-b/")
	if err != nil {
		t.Fatal(err)
	}
	if len(scoped.Events) != 7 || !scoped.AtEnd() { // i%3 == 2 for i < 23
		t.Fatalf("scope team-b/: %d events", len(scoped.Events))
	}
	for _, ev := range scoped.Events {
		if !strings.HasPrefix(ev.SessionID, "sess-b-") {
			t.Errorf("scope team-b/ sees %s", ev.SessionID)
		}
	}
}

// flakySink fails while down and records what it took. While down it
// fails before sending (a refused connection) unless halfway is set: then
// it fails after the receiver may have read part of the batch.
type flakySink struct {
	mu       sync.Mutex
	down     bool
	halfway  bool
	attempts int
	got      []string
	closed   bool
}

func (s *flakySink) Send(ctx context.Context, batch []export.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	if s.down {
		if s.halfway {
			return errors.New("receiver reset the connection")
		}
		return fmt.Errorf("receiver down: %w", export.ErrNotSent)
	}
	for _, e := range batch {
		s.got = append(s.got, e.Cursor)
	}
	return nil
}

func (s *flakySink) Close() error { s.closed = true; return nil }

func (s *flakySink) set(down, halfway bool) {
	s.mu.Lock()
	s.down, s.halfway = down, halfway
	s.mu.Unlock()
}

func (s *flakySink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

func (s *flakySink) tries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A sink that fails lags and then catches up; its cursor is durable. A
// batch refused before anything was sent is not counted as resent however
// often it is tried; one that failed after the receiver may have read it
// is, once, when it is sent again; a restart sends again only what was
// sent and not acknowledged.
func TestDeliverer(t *testing.T) {
	t.Parallel()
	l := exporttest.New(t)
	l.Append(t, 30)
	sink := &flakySink{}
	d := &export.Deliverer{Name: "siem", Store: l, Encoder: export.Encoder{Format: trace.ACS}, Sink: sink,
		Batch: 7, Poll: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- d.Run(ctx) }()
	waitFor(t, "30 entries", func() bool { return sink.count() == 30 })
	sink.set(true, false)
	l.Append(t, 10)
	tries := sink.tries()
	waitFor(t, "three refused attempts", func() bool { return sink.tries() >= tries+3 })
	if st := d.Status(); !st.Failing || st.EntriesBehind != 10 || st.NextLeaf != 30 || st.Acknowledged != 30 || st.Resent != 0 ||
		st.Delivery != "acknowledged" || !strings.Contains(st.LastError, "receiver down") {
		t.Errorf("while down: %+v", st)
	}
	sink.set(true, true)
	tries = sink.tries()
	waitFor(t, "a failure after sending", func() bool { return sink.tries() >= tries+2 })
	sink.set(false, false)
	waitFor(t, "40 entries", func() bool { return sink.count() == 40 })
	waitFor(t, "caught up", func() bool { return d.Status().EntriesBehind == 0 })
	if st := d.Status(); st.Failing || st.Resent != 7 || st.Acknowledged != 40 || st.SentUnconfirmed != 0 {
		t.Errorf("caught up: %+v", st)
	}
	cancel()
	<-done
	if !sink.closed {
		t.Error("sink not closed")
	}
	for i, c := range sink.got {
		if c != fmt.Sprint(i) {
			t.Fatalf("event %d has cursor %s: not in order, or repeated", i, c)
		}
	}
	c, err := l.ExportCursor(context.Background(), "siem")
	// The batch of 7 that failed after it may have been read went out
	// again: resent; the refused attempts before it sent nothing.
	if err != nil || c.Next != 40 || c.SentTo != 40 || c.Acknowledged != 40 || c.Resent != 7 {
		t.Fatalf("stored cursor %+v, %v", c, err)
	}

	// Killed after [40, 45) was sent and before its acknowledgement was
	// recorded: the next run sends them again and counts them.
	l.Append(t, 5)
	crashed := c
	crashed.SentTo = 45
	if err := l.PutExportCursor(context.Background(), crashed, 40); err != nil {
		t.Fatal(err)
	}
	sink2 := &flakySink{}
	d2 := &export.Deliverer{Name: "siem", Store: l, Encoder: export.Encoder{Format: trace.ACS}, Sink: sink2, Poll: 5 * time.Millisecond}
	ctx, cancel = context.WithCancel(context.Background())
	go func() { done <- d2.Run(ctx) }()
	waitFor(t, "45 entries", func() bool { return d2.Status().NextLeaf == 45 })
	cancel()
	<-done
	if sink2.count() != 5 || sink2.got[0] != "40" {
		t.Errorf("after the crash the sink got %v", sink2.got)
	}
	if c, _ := l.ExportCursor(context.Background(), "siem"); c.Resent != 12 || c.Acknowledged != 45 {
		t.Errorf("after the crash: %+v, want 7+5 resent of 45", c)
	}
}

// Two processes delivering under one name: the second one's cursor write
// loses the compare-and-swap, so neither moves the cursor past what it
// did not send.
func TestCursorCompareAndSwap(t *testing.T) {
	t.Parallel()
	l := exporttest.New(t)
	ctx := context.Background()
	now := time.Now()
	if err := l.PutExportCursor(ctx, ledger.ExportCursor{Name: "x", UpdatedAt: now}, 0); err != nil {
		t.Fatal(err)
	}
	if err := l.PutExportCursor(ctx, ledger.ExportCursor{Name: "x", Next: 3, SentTo: 3, UpdatedAt: now}, 0); err != nil {
		t.Fatal(err)
	}
	if err := l.PutExportCursor(ctx, ledger.ExportCursor{Name: "x", Next: 2, SentTo: 2, UpdatedAt: now}, 0); !errors.Is(err, ledger.ErrCursorMoved) {
		t.Fatalf("stale writer: %v", err)
	}
}

// A batch asked longer than one page of the store is cut to a page: the
// store's short page is not read as leaves missing from the ledger.
func TestDelivererBatchOverPage(t *testing.T) {
	t.Parallel()
	l := exporttest.New(t)
	l.Append(t, ledger.MaxExportPage+3)
	sink := &flakySink{}
	d := &export.Deliverer{Name: "lake", Store: l, Encoder: export.Encoder{Format: trace.ACS}, Sink: sink,
		Batch: 2 * ledger.MaxExportPage, Poll: 5 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- d.Run(ctx) }()
	waitFor(t, "every entry", func() bool { return d.Status().NextLeaf == ledger.MaxExportPage+3 })
	cancel()
	<-done
	if st := d.Status(); st.LastError != "" || st.Acknowledged != ledger.MaxExportPage+3 || sink.count() != ledger.MaxExportPage+3 {
		t.Errorf("status %+v, sink got %d", st, sink.count())
	}
}
