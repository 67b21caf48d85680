package tlog

import (
	"context"
	"errors"
	"fmt"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

var hasher = rfc6962.DefaultHasher

var rangeFactory = &compact.RangeFactory{Hash: hasher.HashChildren}

// treeReader reads hashes of the tree of a fixed size from storage. One
// reader serves one request, so it memoizes the partial tiles it rebuilt:
// the nodes of one proof often share a tile.
type treeReader struct {
	s       TileReader
	size    uint64
	cache   *tileCache // full tiles shared across readers; nil: none
	partial map[[2]uint64][]byte
}

// levelWidth is how many hashes tree level 8*level has in a tree of size.
func levelWidth(size uint64, level int) uint64 {
	return size >> (TileHeight * uint(level))
}

// tileHashes returns the packed hashes of tile (level, n) at width, which
// must not exceed what the tree holds.
func (r *treeReader) tileHashes(ctx context.Context, level int, n uint64, width int) ([]byte, error) {
	if avail := levelWidth(r.size, level); n*TileWidth+uint64(width) > avail || n > avail/TileWidth {
		return nil, fmt.Errorf("%w: tile %d/%d width %d is beyond tree size %d", ErrNotFound, level, n, width, r.size)
	}
	if width == TileWidth {
		if r.cache != nil {
			if t := r.cache.get(level, n); t != nil {
				return t, nil
			}
		}
		t, err := r.s.FullTile(ctx, level, n)
		if err != nil {
			return nil, fmt.Errorf("couldn't read tile %d/%d: %w", level, n, err)
		}
		if len(t) != TileWidth*HashSize {
			return nil, fmt.Errorf("stored tile %d/%d is %d bytes, want %d", level, n, len(t), TileWidth*HashSize)
		}
		if r.cache != nil {
			r.cache.put(level, n, t)
		}
		return t, nil
	}
	key := [2]uint64{uint64(level), n}
	if t, ok := r.partial[key]; ok && len(t) == width*HashSize {
		return t, nil
	}
	t, err := r.readPartial(ctx, level, n, width)
	if err != nil {
		return nil, err
	}
	if r.partial == nil {
		r.partial = make(map[[2]uint64][]byte)
	}
	r.partial[key] = t
	return t, nil
}

// readPartial rebuilds a partial tile: leaf hashes for level 0, the roots
// of the full tiles one level down otherwise.
func (r *treeReader) readPartial(ctx context.Context, level int, n uint64, width int) ([]byte, error) {
	start := n * TileWidth
	if level == 0 {
		leaves, err := r.s.Leaves(ctx, start, start+uint64(width))
		if err != nil {
			return nil, fmt.Errorf("couldn't read leaves for tile 0/%d.p/%d: %w", n, width, err)
		}
		out := make([]byte, 0, width*HashSize)
		for _, l := range leaves {
			h := LeafHash(l)
			out = append(out, h[:]...)
		}
		return out, nil
	}
	roots, err := r.s.TileRoots(ctx, level-1, start, start+uint64(width))
	if err != nil {
		return nil, fmt.Errorf("couldn't read tile roots for tile %d/%d.p/%d: %w", level, n, width, err)
	}
	if len(roots) != width*HashSize {
		return nil, fmt.Errorf("storage returned %d bytes of roots for tile %d/%d.p/%d", len(roots), level, n, width)
	}
	return roots, nil
}

// nodeHash returns the hash of a perfect subtree contained in the tree.
func (r *treeReader) nodeHash(ctx context.Context, id compact.NodeID) ([]byte, error) {
	level := int(id.Level / TileHeight)
	sub := id.Level % TileHeight
	first := id.Index << sub
	count := uint64(1) << sub
	n := first / TileWidth
	width := min(levelWidth(r.size, level)-n*TileWidth, TileWidth)
	if first%TileWidth+count > width {
		return nil, fmt.Errorf("node %d/%d is not complete in a tree of size %d", id.Level, id.Index, r.size)
	}
	t, err := r.tileHashes(ctx, level, n, int(width))
	if err != nil {
		return nil, err
	}
	off := first % TileWidth
	return subtreeHash(t[off*HashSize : (off+count)*HashSize]), nil
}

func (r *treeReader) nodeHashes(ctx context.Context, ids []compact.NodeID) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		h, err := r.nodeHash(ctx, id)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// compactRange returns the compact range [0, size), the right edge that
// integration extends.
func (r *treeReader) compactRange(ctx context.Context) (*compact.Range, error) {
	hashes, err := r.nodeHashes(ctx, compact.RangeNodes(0, r.size, nil))
	if err != nil {
		return nil, err
	}
	return rangeFactory.NewRange(0, r.size, hashes)
}

// root returns the RFC 6962 root of the tree, the empty-tree hash for 0.
func (r *treeReader) root(ctx context.Context) ([HashSize]byte, error) {
	var out [HashSize]byte
	rng, err := r.compactRange(ctx)
	if err != nil {
		return out, err
	}
	h, err := rng.GetRootHash(nil)
	if err != nil {
		return out, err
	}
	if h == nil {
		// RFC 6962 §2.1: the empty tree's hash is SHA-256 of the empty
		// string, which the compact range does not produce by itself.
		h = hasher.EmptyRoot()
	}
	copy(out[:], h)
	return out, nil
}

func (r *treeReader) inclusion(ctx context.Context, index uint64) ([][]byte, error) {
	nodes, err := proof.Inclusion(index, r.size)
	if err != nil {
		return nil, err
	}
	return r.proof(ctx, nodes)
}

func (r *treeReader) consistency(ctx context.Context, oldSize uint64) ([][]byte, error) {
	if oldSize > r.size {
		return nil, fmt.Errorf("%w: old size %d is larger than new size %d", ErrBadRange, oldSize, r.size)
	}
	nodes, err := proof.Consistency(oldSize, r.size)
	if err != nil {
		return nil, err
	}
	return r.proof(ctx, nodes)
}

// proof reads the hashes of a proof's nodes and folds them into the proof.
func (r *treeReader) proof(ctx context.Context, nodes proof.Nodes) ([][]byte, error) {
	hashes, err := r.nodeHashes(ctx, nodes.IDs)
	if err != nil {
		return nil, err
	}
	return nodes.Rehash(hashes, hasher.HashChildren)
}

// ErrBadRange means a proof was asked for sizes or indexes that do not fit
// (old size above new size, an index beyond the tree).
var ErrBadRange = errors.New("tlog: bad proof range")
