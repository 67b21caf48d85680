package tlog

import (
	"context"
	"errors"
	"testing"

	"golang.org/x/mod/sumdb/note"
	sumtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
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
	tlogtest.IntegrateAll(t, l)
	first, err := l.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oldSize, oldRoot := tlogtest.OpenCheckpoint(t, vkeys[0], first)
	m.addPending(65000, 539)
	tlogtest.IntegrateAll(t, l)
	signed, err := l.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	size, root := tlogtest.OpenCheckpoint(t, vkeys[0], signed)
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
	s := newMemStorage()
	skeys, vkeys := testKeys(t)
	ctx := context.Background()
	l, err := New(ctx, s, Config{Origin: testOrigin, Keys: skeys[:1]})
	if err != nil {
		t.Fatal(err)
	}
	s.addPending(0, 5)
	tlogtest.IntegrateAll(t, l)
	l2, err := New(ctx, s, Config{Origin: testOrigin, Keys: skeys})
	if err != nil {
		t.Fatalf("reopening with an added key: %v", err)
	}
	s.addPending(5, 5)
	tlogtest.IntegrateAll(t, l2)
	signed, err := l2.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pq, _ := NewVerifier(vkeys[1])
	if _, err := note.Open(signed, note.VerifierList(pq)); err != nil {
		t.Fatalf("new checkpoint lacks the added key's signature: %v", err)
	}
	// Dropping the Ed25519 key is refused.
	if _, err := New(ctx, s, Config{Origin: testOrigin, Keys: skeys[1:]}); err == nil {
		t.Fatal("a log without an Ed25519 first key was opened")
	}
}
