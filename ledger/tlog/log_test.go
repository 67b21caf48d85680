package tlog

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
	sumtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/acsledger/acsledger/verify"
)

func newTestLog(t testing.TB, s Storage, cfg Config) *Log {
	t.Helper()
	skeys, _ := testKeys(t)
	cfg.Origin = testOrigin
	cfg.Keys = skeys
	l, err := New(context.Background(), s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// openCheckpointExternally verifies a checkpoint with sumdb/note alone and
// parses its body by hand, not with our parser.
func openCheckpointExternally(t testing.TB, vkey string, signed []byte) (int64, sumtlog.Hash) {
	t.Helper()
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		t.Fatalf("sumdb/note rejects checkpoint: %v\n%s", err, signed)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) != 4 || lines[0] != testOrigin {
		t.Fatalf("checkpoint text %q", n.Text)
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != 32 {
		t.Fatalf("root line %q", lines[2])
	}
	return size, sumtlog.Hash(root)
}

// tileReaderFunc adapts a tile fetcher (direct or HTTP) to sumdb/tlog.
type tileReaderFunc func(path string) ([]byte, error)

func (f tileReaderFunc) Height() int                        { return 8 }
func (f tileReaderFunc) SaveTiles([]sumtlog.Tile, [][]byte) {}
func (f tileReaderFunc) ReadTiles(tiles []sumtlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, tile := range tiles {
		b, err := f(c2spPathFromSumdb(tile))
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

func logTileFetcher(l *Log) tileReaderFunc {
	return func(path string) ([]byte, error) {
		level, n, w, err := ParseTilePath(path)
		if err != nil {
			return nil, err
		}
		return l.Tile(context.Background(), level, n, w)
	}
}

// checkAgainstTiles checks every leaf's inclusion and the consistency from
// oldSize with sumdb/tlog reading only tiles and entry bundles.
func checkAgainstTiles(t testing.TB, fetch tileReaderFunc, size int64, root sumtlog.Hash, oldSize int64, oldRoot sumtlog.Hash) {
	t.Helper()
	tree := sumtlog.Tree{N: size, Hash: root}
	// Tiles are fetched once each; sumdb/tlog still verifies every one it
	// is given against the tree.
	seen := map[string][]byte{}
	fetch = func(inner tileReaderFunc) tileReaderFunc {
		return func(path string) ([]byte, error) {
			if b, ok := seen[path]; ok {
				return b, nil
			}
			b, err := inner(path)
			if err == nil {
				seen[path] = b
			}
			return b, err
		}
	}(fetch)
	hr := sumtlog.TileHashReader(tree, fetch)
	// Every leaf of small trees; a sample of large ones, all tiles still read.
	stride := max(1, size/2000)
	for i := int64(0); i < size; i++ {
		if i%TileWidth == 0 {
			w := min(size-i, TileWidth)
			bundle, err := fetch(TilePath(EntriesLevel, uint64(i/TileWidth), int(w)))
			if err != nil {
				t.Fatal(err)
			}
			leaves, err := ParseBundle(bundle)
			if err != nil || int64(len(leaves)) != w {
				t.Fatalf("bundle %d: %d leaves, %v", i/TileWidth, len(leaves), err)
			}
			for j, leaf := range leaves {
				idx := i + int64(j)
				if idx%stride != 0 && idx != size-1 {
					continue
				}
				if _, err := ParseLeaf(leaf); err != nil {
					t.Fatalf("leaf %d: %v", idx, err)
				}
				p, err := sumtlog.ProveRecord(size, idx, hr)
				if err != nil {
					t.Fatalf("sumdb/tlog could not prove leaf %d from tiles: %v", idx, err)
				}
				if err := sumtlog.CheckRecord(p, size, root, idx, sumtlog.RecordHash(leaf)); err != nil {
					t.Fatalf("leaf %d: %v", idx, err)
				}
			}
		}
	}
	if oldSize > 0 {
		p, err := sumtlog.ProveTree(size, oldSize, hr)
		if err != nil {
			t.Fatal(err)
		}
		if err := sumtlog.CheckTree(p, size, root, oldSize, oldRoot); err != nil {
			t.Fatalf("consistency %d -> %d: %v", oldSize, size, err)
		}
	}
}

func TestLogIntegratesAndVerifiesExternally(t *testing.T) {
	t.Parallel()
	db := openSQLite(t)
	s := NewSQLiteStorage(db, db)
	l := newTestLog(t, s, Config{BatchSize: 1000})
	_, vkeys := testKeys(t)
	ctx := context.Background()

	if _, err := l.Checkpoint(ctx); !errors.Is(err, ErrNotFound) {
		t.Fatalf("empty log checkpoint: %v", err)
	}
	var oldSize int64
	var oldRoot sumtlog.Hash
	for round, n := range []int64{1, 255, 1, 300, 1000} {
		appendEntries(t, db, fmt.Sprintf("sess-%d", round), 0, n)
		integrateAll(t, l)
		signed, err := l.Checkpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		size, root := openCheckpointExternally(t, vkeys[0], signed)
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
		checkAgainstTiles(t, logTileFetcher(l), size, root, oldSize, oldRoot)
		// Our own proofs, checked with transparency-dev/merkle.
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
	if _, err := l.ConsistencyProof(ctx, 10, 5); !errors.Is(err, ErrBadRange) {
		t.Fatalf("old > new: %v", err)
	}
}

func TestEntryProofIsTlogProof(t *testing.T) {
	t.Parallel()
	db := openSQLite(t)
	s := NewSQLiteStorage(db, db)
	l := newTestLog(t, s, Config{})
	_, vkeys := testKeys(t)
	ctx := context.Background()
	appendEntries(t, db, "a", 0, 10)
	appendEntries(t, db, "b", 0, 7)
	integrateAll(t, l)
	doc, idx, err := l.EntryProof(ctx, "b", 3)
	if err != nil {
		t.Fatal(err)
	}
	if idx != 13 {
		t.Fatalf("leaf index %d, want 13", idx)
	}
	// Parse the tlog-proof by hand and verify with transparency-dev/merkle.
	head, cpText, ok := strings.Cut(string(doc), "\n\n")
	if !ok {
		t.Fatalf("no empty line in proof:\n%s", doc)
	}
	lines := strings.Split(head, "\n")
	if lines[0] != "c2sp.org/tlog-proof@v1" || lines[1] != "index 13" {
		t.Fatalf("proof header %q", lines[:2])
	}
	var p [][]byte
	for _, l := range lines[2:] {
		h, err := base64.StdEncoding.DecodeString(l)
		if err != nil {
			t.Fatal(err)
		}
		p = append(p, h)
	}
	size, root := openCheckpointExternally(t, vkeys[0], []byte(cpText))
	leaf, _ := Leaf{SessionID: "b", Position: 3, EntryHash: entryHash("b", 3)}.MarshalJCS()
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, 13, uint64(size), rfc6962.DefaultHasher.HashLeaf(leaf), p, root[:]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.EntryProof(ctx, "b", 7); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing entry: %v", err)
	}
	got, err := l.LeafIndexByEntryHash(ctx, entryHash("a", 9))
	if err != nil || got != 9 {
		t.Fatalf("LeafIndexByEntryHash = %d, %v", got, err)
	}
}

// A tree past 65,536 leaves has a full level-1 tile and a level-2 tile; it
// is built over in-memory storage to keep the test fast, and checked with
// sumdb/tlog like the others.
func TestLargeTreeTiles(t *testing.T) {
	t.Parallel()
	_, vkeys := testKeys(t)
	ctx := context.Background()
	m := newMemStorage()
	l := newTestLog(t, m, Config{BatchSize: 4096})
	m.addPending(0, 65000)
	integrateAll(t, l)
	first, err := l.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oldSize, oldRoot := openCheckpointExternally(t, vkeys[0], first)
	m.addPending(65000, 539)
	integrateAll(t, l)
	signed, err := l.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	size, root := openCheckpointExternally(t, vkeys[0], signed)
	if size != 65539 {
		t.Fatalf("size %d", size)
	}
	checkAgainstTiles(t, logTileFetcher(l), size, root, oldSize, oldRoot)
	if _, err := l.Tile(ctx, 1, 0, 256); err != nil {
		t.Fatalf("full level-1 tile: %v", err)
	}
	if _, err := l.Tile(ctx, 2, 0, 1); err != nil {
		t.Fatalf("partial level-2 tile: %v", err)
	}
	if _, err := l.Tile(ctx, 2, 0, 2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("tile beyond the tree: %v", err)
	}
}

// Adding a post-quantum key later must not strand checkpoints signed before.
func TestAddingAKeyKeepsTheLogOpen(t *testing.T) {
	t.Parallel()
	db := openSQLite(t)
	s := NewSQLiteStorage(db, db)
	skeys, vkeys := testKeys(t)
	ctx := context.Background()
	l, err := New(ctx, s, Config{Origin: testOrigin, Keys: skeys[:1]})
	if err != nil {
		t.Fatal(err)
	}
	appendEntries(t, db, "s", 0, 5)
	integrateAll(t, l)
	l2, err := New(ctx, s, Config{Origin: testOrigin, Keys: skeys})
	if err != nil {
		t.Fatalf("reopening with an added key: %v", err)
	}
	appendEntries(t, db, "s", 5, 5)
	integrateAll(t, l2)
	signed, err := l2.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pq, _ := verify.NoteVerifier(vkeys[1])
	if _, err := note.Open(signed, note.VerifierList(pq)); err != nil {
		t.Fatalf("new checkpoint lacks the added key's signature: %v", err)
	}
	// Dropping the Ed25519 key is refused.
	if _, err := New(ctx, s, Config{Origin: testOrigin, Keys: skeys[1:]}); err == nil {
		t.Fatal("a log without an Ed25519 first key was opened")
	}
}
