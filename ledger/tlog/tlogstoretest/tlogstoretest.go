// Package tlogstoretest is the conformance suite every tlog.Storage must
// pass: the storage contract called directly, and the Merkle log run over
// the storage through integration, crashes at each step, concurrent
// integrators and a backlog, with every tree checked by sumdb/tlog and
// transparency-dev/merkle rather than by the log's own code. Each store's
// tests call Run with a fresh database (ledger/pgstore, ledger/sqlitestore).
//
// The package imports no database driver: a store's tests hand it the
// storage and the few table accesses it needs as functions.
package tlogstoretest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
	sumtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
	"github.com/acsledger/acsledger/verify"
)

// DB is one store's log storage over a fresh, migrated database, with the
// access to the tables under it that the suite needs.
type DB struct {
	Storage tlog.Storage

	// Append appends n entries to session at positions from..from+n-1 in
	// one committed transaction, creating the session when from is 0, the
	// way the ledger appends: each entry joins the log's pending queue. The
	// entry hashes are tlogtest.EntryHash(session, position).
	Append func(t testing.TB, session string, from, n int64)

	// AppendUncommitted is Append in a transaction left open, so the
	// entries take their ids now and become visible at commit, after
	// entries with larger ids. Nil for a store with one writer, where
	// commits cannot overtake each other.
	AppendUncommitted func(t testing.TB, session string, from, n int64) (commit func())

	// Counts reads the log's bookkeeping from the tables.
	Counts func(t testing.TB) Counts
}

// Counts are the row counts EveryEntryOnce checks.
type Counts struct {
	Entries, Leaves, DistinctLeafEntries, Pending, MaxLeafIndex int64
}

// Open returns a DB over a fresh database, closed by the test's cleanup.
type Open func(t *testing.T) DB

// Run runs the suite against databases from open.
func Run(t *testing.T, open Open) {
	t.Run("Contract", func(t *testing.T) { t.Parallel(); testContract(t, open(t)) })
	t.Run("IntegrateAndVerifyExternally", func(t *testing.T) { t.Parallel(); testIntegrate(t, open(t)) })
	t.Run("EntryProofIsTlogProof", func(t *testing.T) { t.Parallel(); testEntryProof(t, open(t)) })
	t.Run("SessionLeaves", func(t *testing.T) { t.Parallel(); testSessionLeaves(t, open(t)) })
	t.Run("FirstAnchor", func(t *testing.T) { t.Parallel(); testFirstAnchor(t, open(t)) })
	t.Run("CrashRecovery", func(t *testing.T) { t.Parallel(); testCrashRecovery(t, open) })
	t.Run("ConcurrentIntegrators", func(t *testing.T) { t.Parallel(); testConcurrentIntegrators(t, open(t)) })
	t.Run("RunCatchesUpOnBacklog", func(t *testing.T) { t.Parallel(); testRunCatchesUp(t, open(t)) })
	t.Run("Timestamps", func(t *testing.T) { t.Parallel(); testTimestamps(t, open(t)) })
	// Only stores whose commits can overtake each other have this case.
	if db := open(t); db.AppendUncommitted != nil {
		t.Run("OutOfOrderCommit", func(t *testing.T) { t.Parallel(); testOutOfOrderCommit(t, db) })
	}
}

// Keys are the deterministic log keys of the suite: Ed25519 and ML-DSA-44.
func Keys(t testing.TB) (skeys, vkeys []string) {
	t.Helper()
	for i, alg := range []tlog.Algorithm{tlog.Ed25519, tlog.CosignatureMLDSA44} {
		s, v, err := tlog.KeyFromSeed(tlogtest.Origin, alg, tlogtest.Seed(fmt.Sprint("log ", i)))
		if err != nil {
			t.Fatal(err)
		}
		skeys, vkeys = append(skeys, s), append(vkeys, v)
	}
	return skeys, vkeys
}

// NewLog opens a log over s with the suite's keys and origin.
func NewLog(t testing.TB, s tlog.Storage, cfg tlog.Config) *tlog.Log {
	t.Helper()
	cfg.Origin = tlogtest.Origin
	cfg.Keys, _ = Keys(t)
	l, err := tlog.New(context.Background(), s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// EveryEntryOnce checks that every entry has exactly one leaf, the queue is
// empty and the leaf indexes are 0..n-1.
func EveryEntryOnce(t testing.TB, db DB) {
	t.Helper()
	c := db.Counts(t)
	if c.Entries != c.Leaves || c.Leaves != c.DistinctLeafEntries || c.Pending != 0 || c.MaxLeafIndex != c.Leaves-1 {
		t.Fatalf("entries %d, leaves %d (distinct %d, max idx %d), pending %d", c.Entries, c.Leaves, c.DistinctLeafEntries, c.MaxLeafIndex, c.Pending)
	}
}

// tileReader serves the log's tiles to sumdb/tlog, each fetched once.
type tileReader struct {
	l    *tlog.Log
	seen map[sumtlog.Tile][]byte
}

func (r *tileReader) Height() int                        { return 8 }
func (r *tileReader) SaveTiles([]sumtlog.Tile, [][]byte) {}
func (r *tileReader) ReadTiles(tiles []sumtlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, tile := range tiles {
		b, err := r.read(tile.L, tile.N, tile.W)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

func (r *tileReader) read(level int, n int64, w int) ([]byte, error) {
	key := sumtlog.Tile{H: 8, L: level, N: n, W: w}
	if b, ok := r.seen[key]; ok {
		return b, nil
	}
	b, err := r.l.Tile(context.Background(), level, uint64(n), w)
	if err == nil {
		r.seen[key] = b
	}
	return b, err
}

// CheckTiles checks, with sumdb/tlog reading only the log's tiles and
// entry bundles, the inclusion of every leaf of small trees (a sample of
// large ones) in the tree (size, root), and its consistency with (oldSize,
// oldRoot) when oldSize > 0. The tiles are read through a fresh reader, so
// a tampered table is seen even by a log that cached it.
func CheckTiles(l *tlog.Log, size int64, root sumtlog.Hash, oldSize int64, oldRoot sumtlog.Hash) error {
	r := &tileReader{l: l, seen: map[sumtlog.Tile][]byte{}}
	hr := sumtlog.TileHashReader(sumtlog.Tree{N: size, Hash: root}, r)
	stride := max(1, size/2000)
	for i := int64(0); i < size; i += tlog.TileWidth {
		w := min(size-i, tlog.TileWidth)
		bundle, err := r.read(tlog.EntriesLevel, i/tlog.TileWidth, int(w))
		if err != nil {
			return fmt.Errorf("bundle %d: %w", i/tlog.TileWidth, err)
		}
		leaves, err := tlog.ParseBundle(bundle)
		if err != nil || int64(len(leaves)) != w {
			return fmt.Errorf("bundle %d: %d leaves, %v", i/tlog.TileWidth, len(leaves), err)
		}
		for j, leaf := range leaves {
			idx := i + int64(j)
			if idx%stride != 0 && idx != size-1 {
				continue
			}
			if _, err := tlog.ParseLeaf(leaf); err != nil {
				return fmt.Errorf("leaf %d: %w", idx, err)
			}
			p, err := sumtlog.ProveRecord(size, idx, hr)
			if err != nil {
				return fmt.Errorf("sumdb/tlog could not prove leaf %d from tiles: %w", idx, err)
			}
			if err := sumtlog.CheckRecord(p, size, root, idx, sumtlog.RecordHash(leaf)); err != nil {
				return fmt.Errorf("leaf %d: %w", idx, err)
			}
		}
	}
	if oldSize > 0 {
		p, err := sumtlog.ProveTree(size, oldSize, hr)
		if err != nil {
			return err
		}
		if err := sumtlog.CheckTree(p, size, root, oldSize, oldRoot); err != nil {
			return fmt.Errorf("consistency %d -> %d: %w", oldSize, size, err)
		}
	}
	return nil
}

func checkTiles(t testing.TB, l *tlog.Log, size int64, root sumtlog.Hash, oldSize int64, oldRoot sumtlog.Hash) {
	t.Helper()
	if err := CheckTiles(l, size, root, oldSize, oldRoot); err != nil {
		t.Fatal(err)
	}
}

// testContract calls the storage directly: the sentinel errors of an empty
// log, compare-and-swap of leaves and checkpoints, and cosignatures.
func testContract(t *testing.T, db DB) {
	ctx := context.Background()
	s := db.Storage
	h := tlogtest.EntryHash("s", 0)
	for name, err := range map[string]error{
		"LatestCheckpoint":     func() error { _, err := s.LatestCheckpoint(ctx); return err }(),
		"Checkpoint":           func() error { _, err := s.Checkpoint(ctx, 1); return err }(),
		"FullTile":             func() error { _, err := s.FullTile(ctx, 0, 0); return err }(),
		"TileRoots":            func() error { _, err := s.TileRoots(ctx, 0, 0, 1); return err }(),
		"Leaves":               func() error { _, err := s.Leaves(ctx, 0, 1); return err }(),
		"LeafIndexByPosition":  func() error { _, err := s.LeafIndexByPosition(ctx, "s", 0); return err }(),
		"LeafIndexByEntryHash": func() error { _, err := s.LeafIndexByEntryHash(ctx, h); return err }(),
	} {
		if !errors.Is(err, tlog.ErrNotFound) {
			t.Errorf("%s on an empty log = %v, want ErrNotFound", name, err)
		}
	}
	if size, err := s.Size(ctx); err != nil || size != 0 {
		t.Fatalf("Size of an empty log = %d, %v", size, err)
	}

	db.Append(t, "s", 0, 3)
	pending, err := s.Pending(ctx, 0, 10)
	if err != nil || len(pending) != 3 {
		t.Fatalf("Pending = %d entries, %v; want 3", len(pending), err)
	}
	for i, p := range pending {
		if p.Leaf.SessionID != "s" || p.Leaf.Position != int64(i) || p.Leaf.EntryHash != tlogtest.EntryHash("s", int64(i)) {
			t.Fatalf("pending %d = %+v", i, p)
		}
		if i > 0 && p.EntryID <= pending[i-1].EntryID {
			t.Fatalf("pending not in entry id order: %+v", pending)
		}
	}
	if after, err := s.Pending(ctx, pending[0].EntryID, 1); err != nil || len(after) != 1 || after[0].EntryID != pending[1].EntryID {
		t.Fatalf("Pending after the first, limit 1 = %+v, %v", after, err)
	}
	stored := func(ps []tlog.PendingEntry) []tlog.StoredLeaf {
		var out []tlog.StoredLeaf
		for _, p := range ps {
			data, err := p.Leaf.MarshalJCS()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, tlog.StoredLeaf{EntryID: p.EntryID, EntryHash: p.Leaf.EntryHash, SessionID: p.Leaf.SessionID, Data: data})
		}
		return out
	}
	if err := s.Integrate(ctx, 1, stored(pending[:1]), nil); !errors.Is(err, tlog.ErrConflict) {
		t.Fatalf("Integrate at the wrong start = %v, want ErrConflict", err)
	}
	if err := s.Integrate(ctx, 0, stored(pending[:2]), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Integrate(ctx, 2, stored(pending[:1]), nil); !errors.Is(err, tlog.ErrConflict) {
		t.Fatalf("a second leaf for an entry = %v, want ErrConflict", err)
	}
	if size, err := s.Size(ctx); err != nil || size != 2 {
		t.Fatalf("Size = %d, %v; want 2 (a refused Integrate stores nothing)", size, err)
	}
	if left, err := s.Pending(ctx, 0, 10); err != nil || len(left) != 1 || left[0].EntryID != pending[2].EntryID {
		t.Fatalf("Pending after integrating two = %+v, %v", left, err)
	}
	leaves, err := s.Leaves(ctx, 0, 2)
	if want := stored(pending[:2]); err != nil || len(leaves) != 2 || string(leaves[1]) != string(want[1].Data) {
		t.Fatalf("Leaves = %q, %v", leaves, err)
	}
	if _, err := s.Leaves(ctx, 1, 3); !errors.Is(err, tlog.ErrNotFound) {
		t.Fatalf("Leaves past the end = %v, want ErrNotFound", err)
	}
	if idx, err := s.LeafIndexByPosition(ctx, "s", 1); err != nil || idx != 1 {
		t.Fatalf("LeafIndexByPosition = %d, %v", idx, err)
	}
	if idx, err := s.LeafIndexByEntryHash(ctx, tlogtest.EntryHash("s", 1)); err != nil || idx != 1 {
		t.Fatalf("LeafIndexByEntryHash = %d, %v", idx, err)
	}

	// Checkpoints: compare-and-swap of the latest, one per size.
	if err := s.SwapCheckpoint(ctx, true, 0, 1, []byte("one")); !errors.Is(err, tlog.ErrConflict) {
		t.Fatalf("swapping from a checkpoint that is not there = %v, want ErrConflict", err)
	}
	if err := s.SwapCheckpoint(ctx, false, 0, 1, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := s.SwapCheckpoint(ctx, false, 0, 2, []byte("two")); !errors.Is(err, tlog.ErrConflict) {
		t.Fatalf("a first checkpoint twice = %v, want ErrConflict", err)
	}
	if err := s.SwapCheckpoint(ctx, true, 1, 1, []byte("other one")); !errors.Is(err, tlog.ErrConflict) {
		t.Fatalf("a second checkpoint for size 1 = %v, want ErrConflict", err)
	}
	if err := s.SwapCheckpoint(ctx, true, 0, 2, []byte("two")); !errors.Is(err, tlog.ErrConflict) {
		t.Fatalf("swapping from a stale size = %v, want ErrConflict", err)
	}
	if err := s.SwapCheckpoint(ctx, true, 1, 2, []byte("two")); err != nil {
		t.Fatal(err)
	}
	if n, err := s.LatestCheckpoint(ctx); err != nil || string(n) != "two" {
		t.Fatalf("LatestCheckpoint = %q, %v", n, err)
	}
	if n, err := s.Checkpoint(ctx, 1); err != nil || string(n) != "one" {
		t.Fatalf("Checkpoint(1) = %q, %v", n, err)
	}

	// Cosignatures: oldest first, a repeat is not an error and not stored.
	for _, line := range []string{"b-line", "a-line", "b-line"} {
		if err := s.AddCosignature(ctx, 2, []byte(line)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // distinct created_at
	}
	lines, err := s.Cosignatures(ctx, 2)
	if err != nil || len(lines) != 2 || string(lines[0]) != "b-line" || string(lines[1]) != "a-line" {
		t.Fatalf("Cosignatures = %q, %v", lines, err)
	}
	if lines, err := s.Cosignatures(ctx, 1); err != nil || len(lines) != 0 {
		t.Fatalf("Cosignatures of another size = %q, %v", lines, err)
	}
}

func testIntegrate(t *testing.T, db DB) {
	s := db.Storage
	l := NewLog(t, s, tlog.Config{BatchSize: 1000})
	_, vkeys := Keys(t)
	ctx := context.Background()

	if _, err := l.Checkpoint(ctx); !errors.Is(err, tlog.ErrNotFound) {
		t.Fatalf("empty log checkpoint: %v", err)
	}
	var oldSize int64
	var oldRoot sumtlog.Hash
	for round, n := range []int64{1, 255, 1, 300, 1000} {
		db.Append(t, fmt.Sprintf("sess-%d", round), 0, n)
		tlogtest.IntegrateAll(t, l)
		size, root, signed := tlogtest.LatestCheckpoint(t, l, vkeys[0])
		if size != oldSize+n {
			t.Fatalf("round %d: size %d, want %d", round, size, oldSize+n)
		}
		// The ML-DSA-44 line verifies too.
		pq, err := verify.NoteVerifier(vkeys[1])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := note.Open(signed, note.VerifierList(pq)); err != nil {
			t.Fatalf("ML-DSA-44 signature: %v", err)
		}
		checkTiles(t, l, size, root, oldSize, oldRoot)
		// The log's own proofs, checked with transparency-dev/merkle.
		for _, idx := range []uint64{0, uint64(size) / 2, uint64(size) - 1} {
			p, err := l.InclusionProof(ctx, idx, uint64(size))
			if err != nil {
				t.Fatal(err)
			}
			leaves, _ := s.Leaves(ctx, idx, idx+1)
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, idx, uint64(size), rfc6962.DefaultHasher.HashLeaf(leaves[0]), p, root[:]); err != nil {
				t.Fatalf("inclusion %d/%d: %v", idx, size, err)
			}
		}
		if oldSize > 0 {
			p, err := l.ConsistencyProof(ctx, uint64(oldSize), uint64(size))
			if err != nil {
				t.Fatal(err)
			}
			if err := proof.VerifyConsistency(rfc6962.DefaultHasher, uint64(oldSize), uint64(size), p, oldRoot[:], root[:]); err != nil {
				t.Fatal(err)
			}
		}
		oldSize, oldRoot = size, root
	}
	if oldSize != 1557 {
		t.Fatalf("final size %d", oldSize)
	}
	if _, err := l.ConsistencyProof(ctx, 10, 5); !errors.Is(err, tlog.ErrBadRange) {
		t.Fatalf("old > new: %v", err)
	}
	EveryEntryOnce(t, db)
	if idx, err := s.LeafIndexByPosition(ctx, "sess-3", 7); err != nil || idx != 1+255+1+7 {
		t.Fatalf("LeafIndexByPosition = %d, %v", idx, err)
	}
}

func testEntryProof(t *testing.T, db DB) {
	l := NewLog(t, db.Storage, tlog.Config{})
	_, vkeys := Keys(t)
	ctx := context.Background()
	db.Append(t, "a", 0, 10)
	db.Append(t, "b", 0, 7)
	tlogtest.IntegrateAll(t, l)
	doc, idx, err := l.EntryProof(ctx, "b", 3)
	if err != nil {
		t.Fatal(err)
	}
	if idx != 13 {
		t.Fatalf("leaf index %d, want 13", idx)
	}
	// Parse the tlog-proof by hand and verify with transparency-dev/merkle.
	p, cpText := tlogtest.ParseEntryProof(t, doc, 13)
	size, root := tlogtest.OpenCheckpoint(t, vkeys[0], cpText)
	leaf, _ := tlog.Leaf{SessionID: "b", Position: 3, EntryHash: tlogtest.EntryHash("b", 3)}.MarshalJCS()
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, 13, uint64(size), rfc6962.DefaultHasher.HashLeaf(leaf), p, root[:]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.EntryProof(ctx, "b", 7); !errors.Is(err, tlog.ErrNotFound) {
		t.Fatalf("missing entry: %v", err)
	}
	got, err := l.LeafIndexByEntryHash(ctx, tlogtest.EntryHash("a", 9))
	if err != nil || got != 9 {
		t.Fatalf("LeafIndexByEntryHash = %d, %v", got, err)
	}
}

// testFirstAnchor: an entry's first anchor is the smallest signed tree
// holding its leaf, whatever checkpoints came after, and its proof
// verifies against that tree; an entry no checkpoint covers is ErrNotFound.
func testFirstAnchor(t *testing.T, db DB) {
	l := NewLog(t, db.Storage, tlog.Config{})
	_, vkeys := Keys(t)
	ctx := context.Background()
	db.Append(t, "a", 0, 5)
	tlogtest.IntegrateAll(t, l) // checkpoint 5
	db.Append(t, "a", 5, 3)
	tlogtest.IntegrateAll(t, l) // checkpoint 8
	db.Append(t, "a", 8, 1)
	for _, c := range []struct {
		pos  int64
		size uint64
	}{{0, 5}, {4, 5}, {5, 8}, {7, 8}} {
		a, err := l.FirstAnchorOf(ctx, "a", c.pos)
		if err != nil || a.Index != uint64(c.pos) || a.Size != c.size {
			t.Fatalf("FirstAnchorOf(a, %d) = %+v, %v; want size %d", c.pos, a, err, c.size)
		}
		size, root := tlogtest.OpenCheckpoint(t, vkeys[0], a.Checkpoint)
		leaf, _ := tlog.Leaf{SessionID: "a", Position: c.pos, EntryHash: tlogtest.EntryHash("a", c.pos)}.MarshalJCS()
		if uint64(size) != c.size || proof.VerifyInclusion(rfc6962.DefaultHasher, a.Index, a.Size, rfc6962.DefaultHasher.HashLeaf(leaf), a.Proof, root[:]) != nil {
			t.Fatalf("position %d: the proof does not verify against checkpoint %d", c.pos, size)
		}
	}
	if _, err := l.FirstAnchorOf(ctx, "a", 8); !errors.Is(err, tlog.ErrNotFound) {
		t.Fatalf("unintegrated entry: %v", err)
	}
	tlogtest.IntegrateAll(t, l) // checkpoint 9
	if a, err := l.FirstAnchorOf(ctx, "a", 8); err != nil || a.Size != 9 {
		t.Fatalf("after integration: %+v %v", a, err)
	}
	if _, _, err := db.Storage.FirstCheckpointCovering(ctx, 9); !errors.Is(err, tlog.ErrNotFound) {
		t.Fatalf("leaf past every checkpoint: %v", err)
	}
}

// testSessionLeaves: a session's leaves are found by the session their
// own data names, in index order, across pages, and the last one below a
// tree size; a session id that another's is a prefix of, or that needs
// escaping, matches only itself.
func testSessionLeaves(t *testing.T, db DB) {
	l := NewLog(t, db.Storage, tlog.Config{})
	ctx := context.Background()
	const quoted = `b"\\`
	db.Append(t, "a", 0, 3)
	db.Append(t, "ab", 0, 2)
	db.Append(t, quoted, 0, 2)
	db.Append(t, "a", 3, 1200) // more than one page of SessionLeaves
	tlogtest.IntegrateAll(t, l)
	var got []tlog.LoggedLeaf
	for ll, err := range l.SessionLeaves(ctx, "a") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ll)
	}
	if len(got) != 1203 {
		t.Fatalf("%d leaves of a, want 1203", len(got))
	}
	for i, ll := range got {
		wantIdx := uint64(i)
		if i >= 3 {
			wantIdx = uint64(i) + 4
		}
		if ll.SessionID != "a" || ll.Position != int64(i) || ll.Index != wantIdx || ll.EntryHash != tlogtest.EntryHash("a", int64(i)) {
			t.Fatalf("leaf %d of a: %+v, want position %d at index %d", i, ll, i, wantIdx)
		}
	}
	n := 0
	for ll, err := range l.SessionLeaves(ctx, quoted) {
		if err != nil || ll.SessionID != quoted || ll.Index != uint64(5+n) {
			t.Fatalf("leaf %d of %q: %+v, %v", n, quoted, ll, err)
		}
		n++
	}
	if n != 2 {
		t.Fatalf("%d leaves of %q, want 2", n, quoted)
	}
	for _, c := range []struct {
		session string
		size    uint64
		idx     uint64
		pos     int64
	}{{"a", 1207, 1206, 1202}, {"a", 7, 2, 2}, {"ab", 1207, 4, 1}, {"ab", 4, 3, 0}} {
		ll, err := l.LastSessionLeaf(ctx, c.session, c.size)
		if err != nil || ll.Index != c.idx || ll.Position != c.pos || ll.SessionID != c.session {
			t.Errorf("LastSessionLeaf(%q, %d) = %+v, %v; want index %d position %d", c.session, c.size, ll, err, c.idx, c.pos)
		}
	}
	if _, err := l.LastSessionLeaf(ctx, "ab", 3); !errors.Is(err, tlog.ErrNotFound) {
		t.Errorf("LastSessionLeaf below the session's first leaf: %v, want ErrNotFound", err)
	}
	if _, err := l.LastSessionLeaf(ctx, "nobody", 1207); !errors.Is(err, tlog.ErrNotFound) {
		t.Errorf("LastSessionLeaf of an unknown session: %v, want ErrNotFound", err)
	}
}

var errInjected = errors.New("injected failure")

// faultyStorage fails chosen calls to model a crash at that point: before
// the integration transaction commits, after it commits but before the
// caller hears back, and between integration and checkpoint signing.
type faultyStorage struct {
	tlog.Storage
	failIntegrateBefore bool
	failIntegrateAfter  bool
	failSwap            bool
}

func (f *faultyStorage) Integrate(ctx context.Context, start uint64, leaves []tlog.StoredLeaf, tiles []tlog.FullTile) error {
	if f.failIntegrateBefore {
		return errInjected
	}
	if err := f.Storage.Integrate(ctx, start, leaves, tiles); err != nil {
		return err
	}
	if f.failIntegrateAfter {
		return errInjected
	}
	return nil
}

func (f *faultyStorage) SwapCheckpoint(ctx context.Context, hasOld bool, oldSize, size uint64, note []byte) error {
	if f.failSwap {
		return errInjected
	}
	return f.Storage.SwapCheckpoint(ctx, hasOld, oldSize, size, note)
}

func testCrashRecovery(t *testing.T, open Open) {
	_, vkeys := Keys(t)
	ctx := context.Background()
	for _, crash := range []string{"before commit", "after commit", "before signing"} {
		t.Run(crash, func(t *testing.T) {
			t.Parallel()
			db := open(t)
			f := &faultyStorage{Storage: db.Storage}
			l := NewLog(t, tlog.Storage{Writer: f, Reader: f}, tlog.Config{BatchSize: 64})
			db.Append(t, "s", 0, 300)
			tlogtest.IntegrateAll(t, l)
			db.Append(t, "s", 300, 100)
			switch crash {
			case "before commit":
				f.failIntegrateBefore = true
			case "after commit":
				f.failIntegrateAfter = true
			case "before signing":
				f.failSwap = true
			}
			if _, err := l.Integrate(ctx); !errors.Is(err, errInjected) {
				t.Fatalf("Integrate = %v, want the injected failure", err)
			}
			*f = faultyStorage{Storage: f.Storage}
			// The same process carrying on recovers, and so does a restart.
			tlogtest.IntegrateAll(t, l)
			if cp, err := l.LatestCheckpoint(ctx); err != nil || cp.Size != 400 {
				t.Fatalf("after recovery in process: checkpoint %+v, %v", cp, err)
			}
			restarted := NewLog(t, tlog.Storage{Writer: f, Reader: f}, tlog.Config{BatchSize: 64})
			tlogtest.IntegrateAll(t, restarted)
			EveryEntryOnce(t, db)
			if cp, err := restarted.LatestCheckpoint(ctx); err != nil || cp.Size != 400 {
				t.Fatalf("latest checkpoint after restart %+v, %v", cp, err)
			}
			size, root, _ := tlogtest.LatestCheckpoint(t, restarted, vkeys[0])
			if size != 400 {
				t.Fatalf("checkpoint size %d, want 400", size)
			}
			old, err := f.Checkpoint(ctx, 300)
			if err != nil {
				t.Fatal(err)
			}
			_, oldRoot := tlogtest.OpenCheckpoint(t, vkeys[0], old)
			checkTiles(t, restarted, size, root, 300, oldRoot)
		})
	}
}

// Two integrators over one database: every leaf is written exactly once.
func testConcurrentIntegrators(t *testing.T, db DB) {
	a := NewLog(t, db.Storage, tlog.Config{BatchSize: 50})
	b := NewLog(t, db.Storage, tlog.Config{BatchSize: 50})
	db.Append(t, "s", 0, 1000)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan struct{})
	for _, l := range []*tlog.Log{a, b} {
		go func() {
			defer func() { done <- struct{}{} }()
			for ctx.Err() == nil {
				n, err := l.Integrate(ctx)
				if err == nil && n == 0 {
					return
				}
			}
		}()
	}
	<-done
	<-done
	EveryEntryOnce(t, db)
}

// An entry id that commits after a larger one must still get a leaf.
func testOutOfOrderCommit(t *testing.T, db DB) {
	ctx := context.Background()
	l := NewLog(t, db.Storage, tlog.Config{})
	commit := db.AppendUncommitted(t, "slow", 0, 3) // takes the smaller ids
	db.Append(t, "fast", 0, 5)
	tlogtest.IntegrateAll(t, l)
	commit()
	tlogtest.IntegrateAll(t, l)
	EveryEntryOnce(t, db)
	idx, err := db.Storage.LeafIndexByPosition(ctx, "slow", 0)
	if err != nil || idx != 5 {
		t.Fatalf("slow entry 0 is leaf %d (%v), want 5", idx, err)
	}
}

// failNth fails the nth Integrate call (counting from 1) after its
// transaction committed, as a crash before the integrator hears back.
type failNth struct {
	tlog.Storage
	n, calls atomic.Int64
}

func (f *failNth) Integrate(ctx context.Context, start uint64, leaves []tlog.StoredLeaf, tiles []tlog.FullTile) error {
	if err := f.Storage.Integrate(ctx, start, leaves, tiles); err != nil {
		return err
	}
	if f.calls.Add(1) == f.n.Load() {
		return errInjected
	}
	return nil
}

// waitForSize runs until the latest checkpoint covers size leaves.
func waitForSize(t *testing.T, l *tlog.Log, size uint64) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		cp, err := l.LatestCheckpoint(context.Background())
		if err == nil && cp.Size == size {
			return
		}
		if err == nil && cp.Size > size {
			t.Fatalf("checkpoint size %d, want %d", cp.Size, size)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint for %d leaves: %+v, %v", size, cp, err)
		}
	}
}

// Log.Run catches up on a backlog in pipelined large batches: a batch
// whose storing "fails" after it committed, and (where commits can
// overtake each other) entries that commit late with small ids, still
// leave every entry with exactly one leaf, and the tiles check out with
// sumdb/tlog.
func testRunCatchesUp(t *testing.T, db DB) {
	ctx := context.Background()
	var commitSlow func()
	if db.AppendUncommitted != nil {
		commitSlow = db.AppendUncommitted(t, "slow", 0, 3) // takes the smallest ids
	}
	const sessions, perSession = 8, 250
	for i := range sessions {
		db.Append(t, fmt.Sprintf("sess-%d", i), 0, perSession)
	}
	f := &failNth{Storage: db.Storage}
	f.n.Store(3) // the third batch of the first catch-up
	_, vkeys := Keys(t)
	l := NewLog(t, tlog.Storage{Writer: f, Reader: f}, tlog.Config{BatchSize: 20, BacklogBatchSize: 100, BatchDelay: 10 * time.Millisecond})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v", err)
		}
	}()
	size := uint64(sessions * perSession)
	waitForSize(t, l, size)
	if commitSlow != nil {
		commitSlow()
		l.Notify()
		size += 3
		waitForSize(t, l, size)
		if idx, err := db.Storage.LeafIndexByPosition(ctx, "slow", 2); err != nil || idx != size-1 {
			t.Fatalf("slow entry 2 is leaf %d (%v), want %d", idx, err, size-1)
		}
	}
	EveryEntryOnce(t, db)
	if f.calls.Load() < sessions*perSession/100 {
		t.Fatalf("%d Integrate calls; catching up %d entries in batches of 100 needs at least %d", f.calls.Load(), sessions*perSession, sessions*perSession/100)
	}
	for i := range sessions {
		idx, err := db.Storage.LeafIndexByPosition(ctx, fmt.Sprintf("sess-%d", i), perSession-1)
		if err != nil || idx != uint64(perSession*i+perSession-1) {
			t.Fatalf("sess-%d entry %d is leaf %d (%v), want %d", i, perSession-1, idx, err, perSession*i+perSession-1)
		}
	}
	n, root, _ := tlogtest.LatestCheckpoint(t, l, vkeys[0])
	checkTiles(t, l, n, root, 0, sumtlog.Hash{})
}
