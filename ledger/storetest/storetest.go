// Package storetest is the conformance suite every ledger.Store
// implementation must pass. Call Run from the implementation's tests.
package storetest

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
)

// Open returns an empty store using opts, closed by the test's cleanup.
// Both stores keep what the Guardian records beside the entries, so the
// suite tests that contract too.
type Open func(t *testing.T, opts ledger.Options) Roles

// Roles is a store under test by the roles the suite calls: the entries
// and what the Guardian keeps beside them. A driver's test fills every
// field with its one store. It is a struct, not one interface, so that no contract of the
// ledger is wider than the twelve methods a consumer may take.
type Roles struct {
	ledger.Store
	ledger.StepRecorder
	ledger.StepReader
	ledger.ParamsEraser
	ledger.PolicyBundleStore
}

// Clock is a test clock: it starts at a fixed instant and moves only when
// told to.
type Clock struct{ micros atomic.Int64 }

// NewClock returns a clock set to 2026-03-14T14:00:00Z.
func NewClock() *Clock {
	c := &Clock{}
	c.micros.Store(time.Date(2026, 3, 14, 14, 0, 0, 0, time.UTC).UnixMicro())
	return c
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time { return time.UnixMicro(c.micros.Load()).UTC() }

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) { c.micros.Add(d.Microseconds()) }

//go:embed testdata/*.json
var testdata embed.FS

// Fixtures returns the realistic ContextEntry fixtures in chain order.
func Fixtures(t testing.TB) [][]byte {
	ents, err := testdata.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, e := range ents {
		b, err := testdata.ReadFile(path.Join("testdata", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	if len(out) < 4 {
		t.Fatalf("want at least 4 fixtures, got %d", len(out))
	}
	return out
}

// Synthetic returns a small ContextEntry for step n, with an optional extra
// member to vary its content.
func Synthetic(n int, extra string) []byte {
	return fmt.Appendf(nil, `{"entry_id":"e-%d","step_id":"step-%d","step_type":"steps/toolCallRequest","timestamp":"2026-03-14T14:02:%02d.000Z","decision":"allow","note":%q}`,
		n, n, n%60, extra)
}

// oracle recomputes entry_hash independently of package acs: RFC 8785 via
// gowebpki/jcs over the entry with its link members removed, then SHA-256
// over content || previous (ACS §8.2).
func oracle(t testing.TB, entry []byte, prev *acs.Hash) ([]byte, acs.Hash) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(entry, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "entry_hash")
	delete(m, "previous_hash")
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	content, err := jcs.Transform(b)
	if err != nil {
		t.Fatal(err)
	}
	d := sha256.New()
	d.Write(content)
	if prev != nil {
		d.Write(prev[:])
	}
	var h acs.Hash
	d.Sum(h[:0])
	return content, h
}

// withLinks returns entry with entry_hash and previous_hash members set
// (nil writes null).
func withLinks(t testing.TB, entry []byte, entryHash, prev *acs.Hash) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(entry, &m); err != nil {
		t.Fatal(err)
	}
	link := func(h *acs.Hash) any {
		if h == nil {
			return nil
		}
		return h.String()
	}
	m["entry_hash"] = link(entryHash)
	m["previous_hash"] = link(prev)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// snapshot is everything a store holds, read through the Store interface.
type snapshot struct {
	sessions []ledger.Session
	entries  map[string][]ledger.Entry
}

func takeSnapshot(t testing.TB, s ledger.Store) snapshot {
	t.Helper()
	ctx := context.Background()
	snap := snapshot{entries: make(map[string][]ledger.Entry)}
	f := ledger.SessionFilter{Limit: ledger.MaxPageSize}
	for {
		page, err := s.Sessions(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		snap.sessions = append(snap.sessions, page.Sessions...)
		if page.Next == "" {
			break
		}
		f.Cursor = page.Next
	}
	for _, se := range snap.sessions {
		for e, err := range ledger.AllEntries(ctx, s, se.SessionID) {
			if err != nil {
				t.Fatal(err)
			}
			snap.entries[se.SessionID] = append(snap.entries[se.SessionID], e)
		}
	}
	return snap
}

func (a snapshot) diff(b snapshot) string {
	if len(a.sessions) != len(b.sessions) {
		return fmt.Sprintf("%d sessions became %d", len(a.sessions), len(b.sessions))
	}
	for i := range a.sessions {
		if a.sessions[i] != b.sessions[i] {
			return fmt.Sprintf("session %d changed: %+v became %+v", i, a.sessions[i], b.sessions[i])
		}
	}
	for id, es := range a.entries {
		if len(es) != len(b.entries[id]) {
			return fmt.Sprintf("session %q: %d entries became %d", id, len(es), len(b.entries[id]))
		}
		for i, e := range es {
			f := b.entries[id][i]
			if e.EntryHash != f.EntryHash || !sameHash(e.PreviousHash, f.PreviousHash) || string(e.Content) != string(f.Content) ||
				e.StepID != f.StepID || e.Position != f.Position || !e.RecordedAt.Equal(f.RecordedAt) {
				return fmt.Sprintf("session %q: entry %d changed", id, i)
			}
		}
	}
	return ""
}

func assertUnchanged(t *testing.T, s ledger.Store, before snapshot) {
	t.Helper()
	if d := before.diff(takeSnapshot(t, s)); d != "" {
		t.Fatalf("store changed after a failed append: %s", d)
	}
}

// verifyChain checks a session's stored chain from scratch: positions
// 0..n-1, each previous_hash the prior entry_hash, each entry_hash the
// oracle's over the stored content, and the head the last entry_hash.
func verifyChain(t *testing.T, s ledger.Store, sessionID string) []ledger.Entry {
	t.Helper()
	ctx := context.Background()
	var es []ledger.Entry
	var prev *acs.Hash
	for e, err := range ledger.AllEntries(ctx, s, sessionID) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Position != int64(len(es)) {
			t.Fatalf("session %q: entry %d has position %d", sessionID, len(es), e.Position)
		}
		if !sameHash(e.PreviousHash, prev) {
			t.Fatalf("session %q position %d: previous_hash %v, want %v", sessionID, e.Position, e.PreviousHash, prev)
		}
		d := sha256.New()
		d.Write(e.Content)
		if prev != nil {
			d.Write(prev[:])
		}
		if got := acs.Hash(d.Sum(nil)); got != e.EntryHash {
			t.Fatalf("session %q position %d: stored entry_hash %s, content hashes to %s", sessionID, e.Position, e.EntryHash, got)
		}
		h := e.EntryHash
		prev = &h
		es = append(es, e)
	}
	se, err := s.Session(ctx, sessionID)
	if err != nil {
		t.Fatal(err)
	}
	if se.Length != int64(len(es)) || len(es) > 0 && se.Head != *prev {
		t.Fatalf("session %q: head (length %d, %s), chain (length %d, %v)", sessionID, se.Length, se.Head, len(es), prev)
	}
	return es
}

func sameHash(a, b *acs.Hash) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// Run runs the conformance suite against stores made by open, including
// the tests of what the Guardian keeps beside the entries (Roles).
func Run(t *testing.T, open Open) {
	tests := []struct {
		name string
		fn   func(*testing.T, Open)
	}{
		{"Chain", testChain},
		{"SubmittedLinks", testSubmittedLinks},
		{"Idempotent", testIdempotent},
		{"Conflict", testConflict},
		{"InvalidInput", testInvalidInput},
		{"AgentMismatch", testAgentMismatch},
		{"Batch", testBatch},
		{"BatchAllOrNothing", testBatchAllOrNothing},
		{"BatchReplay", testBatchReplay},
		{"ConcurrentNoFork", testConcurrentNoFork},
		{"ConcurrentRetries", testConcurrentRetries},
		{"Sessions", testSessions},
		{"Entries", testEntries},
		{"EntriesByStep", testEntriesByStep},
		{"Writers", testWriters},
		{"ExpectHead", testExpectHead},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open)
		})
	}
	runGuardian(t, open)
}

func testChain(t *testing.T, open Open) {
	clock := NewClock()
	s := open(t, ledger.Options{Now: clock.Now})
	ctx := context.Background()
	fx := Fixtures(t)
	var prev *acs.Hash
	var contents [][]byte
	for i, f := range fx {
		content, want := oracle(t, f, prev)
		contents = append(contents, content)
		agent := "agent-7"
		if i > 0 {
			agent = "" // later appends need not repeat the agent
		}
		got, err := s.Append(ctx, ledger.Record{SessionID: "sess-chain", AgentID: agent, Entry: f})
		if err != nil {
			t.Fatalf("append fixture %d: %v", i, err)
		}
		wantRes := ledger.Appended{SessionID: "sess-chain", Position: int64(i), EntryHash: want, PreviousHash: prev}
		if !sameResult(got, wantRes) {
			t.Fatalf("append fixture %d: got %+v, want %+v", i, got, wantRes)
		}
		prev = &want
		clock.Advance(time.Second)
	}
	se, err := s.Session(ctx, "sess-chain")
	if err != nil {
		t.Fatal(err)
	}
	start := NewClock().Now()
	want := ledger.Session{SessionID: "sess-chain", AgentID: "agent-7", Length: int64(len(fx)), Head: *prev, Writer: ledger.WriterExternal,
		CreatedAt: start, UpdatedAt: start.Add(time.Duration(len(fx)-1) * time.Second)}
	if !se.CreatedAt.Equal(want.CreatedAt) || !se.UpdatedAt.Equal(want.UpdatedAt) {
		t.Fatalf("session times: got %v, %v; want %v, %v", se.CreatedAt, se.UpdatedAt, want.CreatedAt, want.UpdatedAt)
	}
	se.CreatedAt, se.UpdatedAt = want.CreatedAt, want.UpdatedAt
	if se != want {
		t.Fatalf("session: got %+v, want %+v", se, want)
	}
	es := verifyChain(t, s, "sess-chain")
	for i, e := range es {
		var m map[string]any
		if err := json.Unmarshal(fx[i], &m); err != nil {
			t.Fatal(err)
		}
		if string(e.Content) != string(contents[i]) {
			t.Errorf("entry %d: stored content\n%s\nwant canonical\n%s", i, e.Content, contents[i])
		}
		if e.EntryID != m["entry_id"] || e.StepID != m["step_id"] || e.StepType != m["step_type"] || e.Timestamp != m["timestamp"] {
			t.Errorf("entry %d: columns %q %q %q %q do not match the fixture", i, e.EntryID, e.StepID, e.StepType, e.Timestamp)
		}
		if wantAt := start.Add(time.Duration(i) * time.Second); !e.RecordedAt.Equal(wantAt) {
			t.Errorf("entry %d: recorded at %v, want %v", i, e.RecordedAt, wantAt)
		}
	}
}

func sameResult(a, b ledger.Appended) bool {
	return a.SessionID == b.SessionID && a.Position == b.Position && a.EntryHash == b.EntryHash &&
		sameHash(a.PreviousHash, b.PreviousHash) && a.Replayed == b.Replayed
}

func testSubmittedLinks(t *testing.T, open Open) {
	s := open(t, ledger.Options{})
	ctx := context.Background()
	fx := Fixtures(t)
	_, h0 := oracle(t, fx[0], nil)
	_, h1 := oracle(t, fx[1], &h0)
	bogus := acs.Hash{0xde, 0xad}

	// Wrong previous_hash on the first entry: the ledger expects null.
	before := takeSnapshot(t, s)
	_, err := s.Append(ctx, ledger.Record{SessionID: "s", Entry: withLinks(t, fx[0], &h0, &bogus)})
	wantMismatch(t, err, "previous_hash", 0, nil, &bogus)
	assertUnchanged(t, s, before)

	// Correct links, first entry with explicit null previous_hash.
	got, err := s.Append(ctx, ledger.Record{SessionID: "s", Entry: withLinks(t, fx[0], &h0, nil)})
	if err != nil || got.EntryHash != h0 {
		t.Fatalf("append with correct links: %+v, %v", got, err)
	}

	// Stale previous_hash, wrong entry_hash.
	before = takeSnapshot(t, s)
	_, err = s.Append(ctx, ledger.Record{SessionID: "s", Entry: withLinks(t, fx[1], &h1, &bogus)})
	wantMismatch(t, err, "previous_hash", 1, &h0, &bogus)
	assertUnchanged(t, s, before)
	_, err = s.Append(ctx, ledger.Record{SessionID: "s", Entry: withLinks(t, fx[1], &bogus, &h0)})
	wantMismatch(t, err, "entry_hash", 1, &h1, &bogus)
	assertUnchanged(t, s, before)

	got, err = s.Append(ctx, ledger.Record{SessionID: "s", Entry: withLinks(t, fx[1], &h1, &h0)})
	if err != nil || got.EntryHash != h1 || !sameHash(got.PreviousHash, &h0) || got.Position != 1 {
		t.Fatalf("append with correct links: %+v, %v", got, err)
	}
	// Links are never stored as submitted: content excludes them.
	es := verifyChain(t, s, "s")
	if strings.Contains(string(es[1].Content), "entry_hash") {
		t.Fatalf("stored content carries entry_hash: %s", es[1].Content)
	}
}

func wantMismatch(t *testing.T, err error, member string, pos int64, want, got *acs.Hash) {
	t.Helper()
	var me *ledger.HashMismatchError
	if !errors.Is(err, ledger.ErrHashMismatch) || !errors.As(err, &me) {
		t.Fatalf("got error %v, want a HashMismatchError", err)
	}
	if me.Member != member || me.Position != pos || !sameHash(me.Expected, want) || !sameHash(me.Actual, got) {
		t.Fatalf("mismatch %s at %d expected %v actual %v; want %s at %d expected %v actual %v",
			me.Member, me.Position, me.Expected, me.Actual, member, pos, want, got)
	}
	if !strings.Contains(err.Error(), member) || !strings.Contains(err.Error(), got.String()) {
		t.Fatalf("error message %q does not name the member and submitted value", err)
	}
}

func testIdempotent(t *testing.T, open Open) {
	s := open(t, ledger.Options{})
	ctx := context.Background()
	fx := Fixtures(t)
	var first []ledger.Appended
	for _, f := range fx[:3] {
		r, err := s.Append(ctx, ledger.Record{SessionID: "s", AgentID: "a", Entry: f})
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, r)
	}
	before := takeSnapshot(t, s)
	for i, f := range fx[:3] {
		// A retry may differ in formatting and may carry the links.
		retry := withLinks(t, f, &first[i].EntryHash, first[i].PreviousHash)
		for _, entry := range [][]byte{f, retry} {
			got, err := s.Append(ctx, ledger.Record{SessionID: "s", AgentID: "a", Entry: entry})
			want := first[i]
			want.Replayed = true
			if err != nil || !sameResult(got, want) {
				t.Fatalf("retry of entry %d: got %+v, %v; want %+v", i, got, err, want)
			}
		}
	}
	assertUnchanged(t, s, before)
	// A retry whose links disagree with the stored entry is refused.
	bogus := acs.Hash{1}
	_, err := s.Append(ctx, ledger.Record{SessionID: "s", Entry: withLinks(t, fx[1], &bogus, first[1].PreviousHash)})
	wantMismatch(t, err, "entry_hash", 1, &first[1].EntryHash, &bogus)
	// In a batch too.
	got, err := s.AppendBatch(ctx, []ledger.Record{{SessionID: "s", Entry: fx[2]}, {SessionID: "s", Entry: fx[3]}})
	if err != nil || len(got) != 2 || !got[0].Replayed || got[0].Position != 2 || got[1].Replayed || got[1].Position != 3 {
		t.Fatalf("batch with a retried entry: %+v, %v", got, err)
	}
	verifyChain(t, s, "s")
}

func testConflict(t *testing.T, open Open) {
	s := open(t, ledger.Options{})
	ctx := context.Background()
	orig := Synthetic(1, "original")
	r, err := s.Append(ctx, ledger.Record{SessionID: "s", Entry: orig})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, ledger.Record{SessionID: "s", Entry: Synthetic(2, "")}); err != nil {
		t.Fatal(err)
	}
	before := takeSnapshot(t, s)
	for _, tc := range []struct {
		name  string
		write func() error
		index int
	}{
		{"Append", func() error {
			_, err := s.Append(ctx, ledger.Record{SessionID: "s", Entry: Synthetic(1, "rewritten")})
			return err
		}, 0},
		{"AppendBatch", func() error {
			_, err := s.AppendBatch(ctx, []ledger.Record{
				{SessionID: "s", Entry: Synthetic(3, "")},
				{SessionID: "s", Entry: Synthetic(1, "rewritten")},
			})
			return err
		}, 1},
	} {
		err := tc.write()
		var ce *ledger.ConflictError
		if !errors.Is(err, ledger.ErrConflict) || !errors.As(err, &ce) {
			t.Fatalf("%s: got %v, want a ConflictError", tc.name, err)
		}
		if ce.SessionID != "s" || ce.StepID != "step-1" || ce.Position != 0 || ce.EntryHash != r.EntryHash || ce.Index != tc.index {
			t.Fatalf("%s: conflict %+v, want step-1 at 0 with %s, index %d", tc.name, ce, r.EntryHash, tc.index)
		}
		assertUnchanged(t, s, before)
	}
	// Same step_id in another session is no conflict.
	if _, err := s.Append(ctx, ledger.Record{SessionID: "other", Entry: Synthetic(1, "rewritten")}); err != nil {
		t.Fatal(err)
	}
}

func testInvalidInput(t *testing.T, open Open) {
	const limit = 600
	s := open(t, ledger.Options{MaxEntryBytes: limit})
	ctx := context.Background()
	if _, err := s.Append(ctx, ledger.Record{SessionID: "s", Entry: Synthetic(1, "")}); err != nil {
		t.Fatal(err)
	}
	ok := Synthetic(2, "")
	big := Synthetic(2, strings.Repeat("x", limit))
	for _, tc := range []struct {
		name    string
		rec     ledger.Record
		mention string
	}{
		{"malformed JSON", ledger.Record{SessionID: "s", Entry: []byte(`{"entry_id": "e",`)}, ""},
		{"trailing data", ledger.Record{SessionID: "s", Entry: append(Synthetic(2, ""), " {}"...)}, ""},
		{"array", ledger.Record{SessionID: "s", Entry: []byte(`[1,2]`)}, ""},
		{"string", ledger.Record{SessionID: "s", Entry: []byte(`"entry"`)}, ""},
		{"empty", ledger.Record{SessionID: "s", Entry: nil}, ""},
		{"missing step_id", ledger.Record{SessionID: "s", Entry: []byte(`{"entry_id":"e","step_type":"t"}`)}, "step_id"},
		{"step_id not a string", ledger.Record{SessionID: "s", Entry: []byte(`{"entry_id":"e","step_id":7,"step_type":"t"}`)}, "step_id"},
		{"entry_hash not hex", ledger.Record{SessionID: "s", Entry: []byte(`{"entry_id":"e","step_id":"x","step_type":"t","entry_hash":"zz"}`)}, "entry_hash"},
		{"duplicate member", ledger.Record{SessionID: "s", Entry: []byte(`{"entry_id":"e","step_id":"x","step_id":"y","step_type":"t"}`)}, "step_id"},
		{"NUL in step_id", ledger.Record{SessionID: "s", Entry: []byte(`{"entry_id":"e","step_id":"a\u0000b","step_type":"t"}`)}, "NUL"},
		{"oversized", ledger.Record{SessionID: "s", Entry: big}, "limit"},
		{"empty session id", ledger.Record{SessionID: "", Entry: ok}, "session id"},
		{"long session id", ledger.Record{SessionID: strings.Repeat("s", ledger.MaxSessionIDBytes+1), Entry: ok}, "session id"},
		{"control character in agent id", ledger.Record{SessionID: "s2", AgentID: "a\nb", Entry: ok}, "agent id"},
		{"invalid UTF-8 session id", ledger.Record{SessionID: "s\xff", Entry: ok}, "UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := takeSnapshot(t, s)
			_, err := s.Append(ctx, tc.rec)
			var ie *ledger.InvalidEntryError
			if !errors.Is(err, ledger.ErrInvalidEntry) || !errors.As(err, &ie) {
				t.Fatalf("Append: got %v, want an InvalidEntryError", err)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("Append: error %q does not mention %q", err, tc.mention)
			}
			// The same record inside a batch fails the whole batch and names
			// its index.
			_, err = s.AppendBatch(ctx, []ledger.Record{{SessionID: "s3", Entry: Synthetic(9, "")}, tc.rec})
			if !errors.As(err, &ie) || ie.Index != 1 {
				t.Fatalf("AppendBatch: got %v, want an InvalidEntryError at index 1", err)
			}
			assertUnchanged(t, s, before)
		})
	}
}

func testAgentMismatch(t *testing.T, open Open) {
	s := open(t, ledger.Options{})
	ctx := context.Background()
	if _, err := s.Append(ctx, ledger.Record{SessionID: "s", AgentID: "agent-a", Entry: Synthetic(1, "")}); err != nil {
		t.Fatal(err)
	}
	before := takeSnapshot(t, s)
	_, err := s.Append(ctx, ledger.Record{SessionID: "s", AgentID: "agent-b", Entry: Synthetic(2, "")})
	if !errors.Is(err, ledger.ErrAgentMismatch) || !strings.Contains(err.Error(), "agent-a") || !strings.Contains(err.Error(), "agent-b") {
		t.Fatalf("got %v, want ErrAgentMismatch naming both agents", err)
	}
	assertUnchanged(t, s, before)
}

func testBatch(t *testing.T, open Open) {
	s := open(t, ledger.Options{})
	ctx := context.Background()
	if _, err := s.Append(ctx, ledger.Record{SessionID: "s0", AgentID: "a", Entry: Synthetic(0, "")}); err != nil {
		t.Fatal(err)
	}
	// Interleave three sessions, one of which already exists.
	var rs []ledger.Record
	heads := map[string]*acs.Hash{}
	se0, _ := s.Session(ctx, "s0")
	heads["s0"] = &se0.Head
	lengths := map[string]int64{"s0": 1}
	var want []ledger.Appended
	// 150 records: large enough for a store's bulk path.
	for i := 1; i <= 150; i++ {
		id := fmt.Sprintf("s%d", i%3)
		e := Synthetic(i, id)
		rs = append(rs, ledger.Record{SessionID: id, AgentID: "a", Entry: e})
		_, h := oracle(t, e, heads[id])
		want = append(want, ledger.Appended{SessionID: id, Position: lengths[id], EntryHash: h, PreviousHash: heads[id]})
		heads[id] = &h
		lengths[id]++
	}
	got, err := s.AppendBatch(ctx, rs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d results, want %d", len(got), len(want))
	}
	for i := range want {
		if !sameResult(got[i], want[i]) {
			t.Fatalf("result %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	for id, n := range lengths {
		if es := verifyChain(t, s, id); int64(len(es)) != n {
			t.Fatalf("session %s: %d entries, want %d", id, len(es), n)
		}
	}
	if got, err := s.AppendBatch(ctx, nil); err != nil || len(got) != 0 {
		t.Fatalf("empty batch: %v, %v", got, err)
	}
}

func testBatchAllOrNothing(t *testing.T, open Open) {
	s := open(t, ledger.Options{})
	ctx := context.Background()
	r0, err := s.Append(ctx, ledger.Record{SessionID: "s", AgentID: "a", Entry: Synthetic(0, "")})
	if err != nil {
		t.Fatal(err)
	}
	bogus := acs.Hash{2}
	before := takeSnapshot(t, s)
	for _, tc := range []struct {
		name string
		bad  ledger.Record
		is   error
	}{
		{"hash mismatch", ledger.Record{SessionID: "s", Entry: withLinks(t, Synthetic(5, ""), nil, &bogus)}, ledger.ErrHashMismatch},
		{"agent mismatch", ledger.Record{SessionID: "s", AgentID: "b", Entry: Synthetic(5, "")}, ledger.ErrAgentMismatch},
		{"conflict", ledger.Record{SessionID: "s", Entry: Synthetic(0, "changed")}, ledger.ErrConflict},
		{"invalid", ledger.Record{SessionID: "s", Entry: []byte(`{}`)}, ledger.ErrInvalidEntry},
	} {
		rs := []ledger.Record{
			{SessionID: "new", AgentID: "a", Entry: Synthetic(1, "")},
			{SessionID: "s", Entry: Synthetic(2, "")},
			tc.bad,
			{SessionID: "s", Entry: Synthetic(3, "")},
		}
		if _, err := s.AppendBatch(ctx, rs); !errors.Is(err, tc.is) {
			t.Fatalf("%s: got %v, want %v", tc.name, err, tc.is)
		}
		assertUnchanged(t, s, before)
	}
	se, err := s.Session(ctx, "s")
	if err != nil || se.Head != r0.EntryHash || se.Length != 1 {
		t.Fatalf("session after failed batches: %+v, %v", se, err)
	}
	if _, err := s.Session(ctx, "new"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("session created by a failed batch: %v", err)
	}
}

// testBatchReplay retries a large batch that was half stored: the stored
// half replays, the rest appends after it.
func testBatchReplay(t *testing.T, open Open) {
	s := open(t, ledger.Options{})
	ctx := context.Background()
	var rs []ledger.Record
	for i := range 200 {
		rs = append(rs, ledger.Record{SessionID: fmt.Sprintf("s%d", i%2), Entry: Synthetic(i, "")})
	}
	first, err := s.AppendBatch(ctx, rs[:100])
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.AppendBatch(ctx, rs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		if i < 100 {
			want := first[i]
			want.Replayed = true
			if !sameResult(r, want) {
				t.Fatalf("record %d: got %+v, want the original %+v", i, r, want)
			}
		} else if r.Replayed || r.Position != int64(i/2) {
			t.Fatalf("record %d: got %+v, want a fresh append at position %d", i, r, i/2)
		}
	}
	for _, id := range []string{"s0", "s1"} {
		if es := verifyChain(t, s, id); len(es) != 100 {
			t.Fatalf("session %s: %d entries, want 100", id, len(es))
		}
	}
}

func testConcurrentNoFork(t *testing.T, open Open) {
	s := open(t, ledger.Options{})
	ctx := context.Background()
	const workers, each = 8, 25
	results := make([][]ledger.Appended, workers)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				// Half of the workers also write a second session, so that
				// batches mix sessions.
				id := "shared"
				if w%2 == 1 && i%2 == 1 {
					id = "side"
				}
				r, err := s.Append(ctx, ledger.Record{SessionID: id, AgentID: "a", Entry: Synthetic(w*1000+i, "")})
				if err != nil {
					errs <- err
					return
				}
				results[w] = append(results[w], r)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	byPos := map[string]map[int64]acs.Hash{}
	for _, rs := range results {
		for _, r := range rs {
			if byPos[r.SessionID] == nil {
				byPos[r.SessionID] = map[int64]acs.Hash{}
			}
			if _, dup := byPos[r.SessionID][r.Position]; dup {
				t.Fatalf("session %s: position %d acknowledged twice (fork)", r.SessionID, r.Position)
			}
			byPos[r.SessionID][r.Position] = r.EntryHash
		}
	}
	total := 0
	for id, m := range byPos {
		es := verifyChain(t, s, id)
		if len(es) != len(m) {
			t.Fatalf("session %s: %d entries stored, %d acknowledged", id, len(es), len(m))
		}
		for _, e := range es {
			if m[e.Position] != e.EntryHash {
				t.Fatalf("session %s position %d: acknowledged %s, stored %s", id, e.Position, m[e.Position], e.EntryHash)
			}
		}
		total += len(es)
	}
	if total != workers*each {
		t.Fatalf("%d entries stored, want %d", total, workers*each)
	}
}

func testConcurrentRetries(t *testing.T, open Open) {
	s := open(t, ledger.Options{})
	ctx := context.Background()
	const n = 16
	entry := Synthetic(1, "retried")
	got := make([]ledger.Appended, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			got[i], errs[i] = s.Append(ctx, ledger.Record{SessionID: "s", AgentID: "a", Entry: entry})
		})
	}
	wg.Wait()
	_, want := oracle(t, entry, nil)
	fresh := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("append %d: %v", i, errs[i])
		}
		if got[i].Position != 0 || got[i].EntryHash != want || got[i].PreviousHash != nil {
			t.Fatalf("append %d: %+v, want position 0 hash %s", i, got[i], want)
		}
		if !got[i].Replayed {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("%d appends reported a fresh write, want exactly 1", fresh)
	}
	if es := verifyChain(t, s, "s"); len(es) != 1 {
		t.Fatalf("%d entries stored, want 1", len(es))
	}
}

func testSessions(t *testing.T, open Open) {
	clock := NewClock()
	s := open(t, ledger.Options{Now: clock.Now})
	ctx := context.Background()
	t0 := clock.Now()
	// Session i is created at t0+i hours by agent-(i%2) and appended to once
	// more an hour later with step_type "kind-i%3".
	for i := range 6 {
		id := fmt.Sprintf("s%d", i)
		if _, err := s.Append(ctx, ledger.Record{SessionID: id, AgentID: fmt.Sprintf("agent-%d", i%2), Entry: Synthetic(0, "")}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Hour)
		e := fmt.Appendf(nil, `{"entry_id":"x","step_id":"x","step_type":"kind-%d"}`, i%3)
		if _, err := s.Append(ctx, ledger.Record{SessionID: id, Entry: e}); err != nil {
			t.Fatal(err)
		}
	}
	hour := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
	for _, tc := range []struct {
		name string
		f    ledger.SessionFilter
		want string
	}{
		{"all", ledger.SessionFilter{}, "s0 s1 s2 s3 s4 s5"},
		{"agent", ledger.SessionFilter{AgentID: "agent-1"}, "s1 s3 s5"},
		{"unknown agent", ledger.SessionFilter{AgentID: "nobody"}, ""},
		{"step type", ledger.SessionFilter{StepType: "kind-2"}, "s2 s5"},
		{"step type and agent", ledger.SessionFilter{StepType: "kind-2", AgentID: "agent-0"}, "s2"},
		{"since", ledger.SessionFilter{Since: hour(4)}, "s3 s4 s5"},
		{"until", ledger.SessionFilter{Until: hour(2)}, "s0 s1"},
		{"window", ledger.SessionFilter{Since: hour(2), Until: hour(4)}, "s1 s2 s3"},
	} {
		var ids []string
		for _, se := range listAll(t, s, tc.f, 0) {
			ids = append(ids, se.SessionID)
		}
		if got := strings.Join(ids, " "); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	// Pagination: pages of 2 give every session once, in creation order.
	all := listAll(t, s, ledger.SessionFilter{}, 2)
	var ids []string
	for _, se := range all {
		ids = append(ids, se.SessionID)
	}
	if !sort.StringsAreSorted(ids) || len(ids) != 6 {
		t.Fatalf("paged listing: %v", ids)
	}
	if all[4].Length != 2 || all[4].AgentID != "agent-0" || !all[4].CreatedAt.Equal(hour(4)) || !all[4].UpdatedAt.Equal(hour(5)) {
		t.Fatalf("session s4: %+v", all[4])
	}
	if _, err := s.Sessions(ctx, ledger.SessionFilter{Cursor: "not-a-cursor"}); err == nil || !strings.Contains(err.Error(), "not-a-cursor") {
		t.Fatalf("bad cursor: %v", err)
	}
}

func listAll(t *testing.T, s ledger.Store, f ledger.SessionFilter, limit int) []ledger.Session {
	t.Helper()
	f.Limit = limit
	var out []ledger.Session
	for pages := 0; ; pages++ {
		page, err := s.Sessions(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		if limit > 0 && len(page.Sessions) > limit {
			t.Fatalf("page of %d sessions, limit %d", len(page.Sessions), limit)
		}
		out = append(out, page.Sessions...)
		if page.Next == "" {
			return out
		}
		if pages > 100 {
			t.Fatal("pagination does not end")
		}
		f.Cursor = page.Next
	}
}

func testEntries(t *testing.T, open Open) {
	s := open(t, ledger.Options{})
	ctx := context.Background()
	const n = 7
	for i := range n {
		if _, err := s.Append(ctx, ledger.Record{SessionID: "s", Entry: Synthetic(i, "")}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := s.Entries(ctx, "s", 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 3 || page[0].Position != 2 || page[2].Position != 4 || page[0].StepID != "step-2" {
		t.Fatalf("entries 2..4: %+v", page)
	}
	if page, err := s.Entries(ctx, "s", n, 10); err != nil || len(page) != 0 {
		t.Fatalf("entries past the end: %v, %v", page, err)
	}
	if _, err := s.Entries(ctx, "nope", 0, 10); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("entries of unknown session: %v", err)
	}
	if _, err := s.Session(ctx, "nope"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("unknown session: %v", err)
	}
	if _, err := s.Entries(ctx, "s", -1, 10); err == nil {
		t.Fatal("negative start position accepted")
	}
	if es := verifyChain(t, s, "s"); len(es) != n {
		t.Fatalf("%d entries, want %d", len(es), n)
	}
}

// testEntriesByStep looks entries up by step_id across sessions: the
// entries come back exactly as Entries reads them, in session_id order, at
// most ledger.MaxEntriesByStep of them, and only the named session's when
// one is named.
func testEntriesByStep(t *testing.T, open Open) {
	clock := NewClock()
	s := open(t, ledger.Options{Now: clock.Now})
	ctx := context.Background()
	// step-1 is in sessions a, b and c (at positions 1, 0 and 2); step-0
	// and step-9 in a only; nothing has step-404.
	for _, r := range []struct {
		session string
		n       int
	}{{"sess-b", 1}, {"sess-a", 0}, {"sess-a", 1}, {"sess-c", 5}, {"sess-c", 6}, {"sess-c", 1}, {"sess-a", 9}} {
		clock.Advance(time.Second)
		if _, err := s.Append(ctx, ledger.Record{SessionID: r.session, Entry: Synthetic(r.n, r.session)}); err != nil {
			t.Fatal(err)
		}
	}
	stored := func(session string, pos int64) ledger.Entry {
		t.Helper()
		es, err := s.Entries(ctx, session, pos, 1)
		if err != nil || len(es) != 1 {
			t.Fatalf("entry %d of %s: %v, %v", pos, session, es, err)
		}
		// The bytes the entry_hash commits to, computed apart from the store.
		var prev *acs.Hash
		if pos > 0 {
			before, err := s.Entries(ctx, session, pos-1, 1)
			if err != nil || len(before) != 1 {
				t.Fatalf("entry %d of %s: %v, %v", pos-1, session, before, err)
			}
			prev = &before[0].EntryHash
		}
		content, hash := oracle(t, Synthetic(mustStep(t, es[0].StepID), session), prev)
		if string(es[0].Content) != string(content) || es[0].EntryHash != hash {
			t.Fatalf("entry %d of %s: stored %s (%s), want %s (%s)", pos, session, es[0].Content, es[0].EntryHash, content, hash)
		}
		return es[0]
	}
	for _, tc := range []struct {
		name, step, session string
		want                []ledger.Entry
	}{
		{"one session", "step-9", "", []ledger.Entry{stored("sess-a", 2)}},
		{"first entry", "step-0", "", []ledger.Entry{stored("sess-a", 0)}},
		{"several sessions, first two by id", "step-1", "", []ledger.Entry{stored("sess-a", 1), stored("sess-b", 0)}},
		{"named session", "step-1", "sess-c", []ledger.Entry{stored("sess-c", 2)}},
		{"named session, other position", "step-1", "sess-b", []ledger.Entry{stored("sess-b", 0)}},
		{"unknown step", "step-404", "", nil},
		{"step of another session", "step-9", "sess-b", nil},
		{"unknown session", "step-1", "sess-nope", nil},
		{"empty step", "", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.EntriesByStep(ctx, tc.step, tc.session)
			if err != nil {
				t.Fatal(err)
			}
			if got == nil {
				t.Error("nil slice, want an empty one")
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d entries %s, want %d %s", len(got), entryKeys(got), len(tc.want), entryKeys(tc.want))
			}
			for i, e := range got {
				w := tc.want[i]
				if e.SessionID != w.SessionID || e.Position != w.Position || e.EntryID != w.EntryID || e.StepID != tc.step ||
					e.StepType != w.StepType || e.Timestamp != w.Timestamp || !e.RecordedAt.Equal(w.RecordedAt) ||
					string(e.Content) != string(w.Content) || e.EntryHash != w.EntryHash || !sameHash(e.PreviousHash, w.PreviousHash) {
					t.Errorf("entry %d: got %+v\nwant %+v", i, e, w)
				}
			}
		})
	}
	if ledger.MaxEntriesByStep != 2 {
		t.Fatalf("MaxEntriesByStep is %d; the cases above assume 2", ledger.MaxEntriesByStep)
	}
}

// mustStep returns n of a Synthetic entry's step id "step-n".
func mustStep(t testing.TB, stepID string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscanf(stepID, "step-%d", &n); err != nil || fmt.Sprintf("step-%d", n) != stepID {
		t.Fatalf("step id %q is not a Synthetic one", stepID)
	}
	return n
}

func entryKeys(es []ledger.Entry) string {
	var ks []string
	for _, e := range es {
		ks = append(ks, fmt.Sprintf("%s/%d", e.SessionID, e.Position))
	}
	return "[" + strings.Join(ks, " ") + "]"
}
