package tlog

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors returned by [Storage] implementations.
var (
	// ErrConflict means a compare-and-swap lost: the log size or the stored
	// checkpoint was not what the caller expected, or an entry already has a
	// leaf. The caller must reload its state.
	ErrConflict = errors.New("tlog: concurrent change")
	// ErrNotFound means the requested leaf, tile or checkpoint does not exist.
	ErrNotFound = errors.New("tlog: not found")
)

// PendingEntry is a ledger entry that has no leaf yet.
type PendingEntry struct {
	EntryID int64
	Leaf    Leaf
}

// StoredLeaf is one leaf as the integrator writes it.
type StoredLeaf struct {
	EntryID   int64
	EntryHash [HashSize]byte
	SessionID string // Leaf.SessionID, the session Data names
	Data      []byte // Leaf.MarshalJCS
}

// SessionTile is one session with leaves in one tile of level 0 (leaves
// TileWidth*Tile .. TileWidth*Tile+TileWidth-1): the stores index a
// session's leaves by these pairs, written with the leaves, instead of an
// index entry per leaf.
type SessionTile struct {
	SessionID string
	Tile      int64
}

// SessionTiles returns the distinct sessions per level-0 tile of leaves
// stored from index start, in order of first appearance.
func SessionTiles(start uint64, leaves []StoredLeaf) []SessionTile {
	var out []SessionTile
	seen := make(map[SessionTile]struct{})
	for i, l := range leaves {
		st := SessionTile{SessionID: l.SessionID, Tile: int64((start + uint64(i)) / TileWidth)}
		// A session's entries are often neighbours: skip the map then.
		if len(out) > 0 && out[len(out)-1] == st {
			continue
		}
		if _, ok := seen[st]; ok {
			continue
		}
		seen[st] = struct{}{}
		out = append(out, st)
	}
	return out
}

// IndexedLeaf is one stored leaf's data with its index in the tree.
type IndexedLeaf struct {
	Index uint64
	Data  []byte
}

// FullTile is a completed tile: 256 hashes of tree level 8*Level, and Root,
// the hash of tree level 8*(Level+1) they reduce to. Partial tiles are never
// stored: they are rebuilt from leaves (level 0) or from the Roots of the
// full tiles one level down, so every stored row is written once and final.
type FullTile struct {
	Level int
	N     uint64
	Data  []byte
	Root  [HashSize]byte
}

// Storage is what the Merkle log needs from a database: the Writer it
// integrates and checkpoints through and the Reader it serves from,
// usually one value in both fields. The stores' LogStorage returns one;
// New takes it whole, and code that only reads takes a Reader (or a
// TileReader). It is a pair rather than one interface so that no contract
// of the log is wider than the twelve methods a consumer may take.
type Storage struct {
	Writer
	Reader
	// Timestamps, when not nil, keeps the RFC 3161 time-stamps of the
	// signed checkpoints (ledger/tsa); nil where a storage has none (the
	// log's in-memory test storage).
	Timestamps TimestampStorage
	// Cosigned, when not nil, finds the checkpoints that have witness
	// cosignatures; a log with a witness policy uses it at start to find
	// the latest checkpoint its policy was satisfied for.
	Cosigned CosignatureIndex
}

// CosignatureIndex lists the checkpoint sizes with stored cosignatures.
type CosignatureIndex interface {
	// CosignedSizes returns up to limit sizes below the given one that
	// have at least one stored cosignature, largest first.
	CosignedSizes(ctx context.Context, below uint64, limit int) ([]uint64, error)
}

// StoredCheckpoint is one signed checkpoint as stored: its tree size and
// its note as the log signed it (no witness cosignatures).
type StoredCheckpoint struct {
	Size uint64
	Note []byte
}

// TimestampStorage keeps the RFC 3161 time-stamp responses of signed
// checkpoints, one per checkpoint size, written once (migration 0017).
type TimestampStorage interface {
	// AddTimestamp stores the time-stamp response for the checkpoint of
	// size, received at. Storing one for a size that has one already is
	// not an error and keeps the first.
	AddTimestamp(ctx context.Context, size uint64, response []byte, at time.Time) error
	// Timestamp returns the stored response for the checkpoint of size;
	// ErrNotFound if it has none (yet).
	Timestamp(ctx context.Context, size uint64) ([]byte, error)
	// LastStamped returns the largest checkpoint size with a stored
	// time-stamp; ErrNotFound if there is none.
	LastStamped(ctx context.Context) (uint64, error)
	// Unstamped returns up to limit checkpoints of size above after that
	// have no time-stamp, smallest first.
	Unstamped(ctx context.Context, after uint64, limit int) ([]StoredCheckpoint, error)
}

// Writer is every write of the log. Implementations must make Integrate
// and SwapCheckpoint atomic: after a crash either all of a call is stored
// or none of it.
type Writer interface {
	// Pending returns up to limit entries with ids above after that have no
	// leaf, lowest entry id first. Entries that become visible late (a
	// Postgres identity committed out of order) must still be returned once
	// visible. The integrator passes after 0 to read the whole queue (entry
	// ids are positive), and the highest id of the batch it is storing to
	// read the next batch meanwhile.
	Pending(ctx context.Context, after int64, limit int) ([]PendingEntry, error)

	// Integrate stores leaves at indexes start, start+1, ... together with
	// the full tiles they complete, and takes their entries off the pending
	// set. It returns ErrConflict if the log does not have exactly start
	// leaves or an entry already has a leaf; nothing is stored then.
	Integrate(ctx context.Context, start uint64, leaves []StoredLeaf, tiles []FullTile) error

	// SwapCheckpoint records note (for a tree of size) as the latest
	// checkpoint if the latest one is still for oldSize (hasOld false: if
	// there is none yet), and appends it to the checkpoint history. It
	// returns ErrConflict otherwise, or if a checkpoint for size exists.
	SwapCheckpoint(ctx context.Context, hasOld bool, oldSize, size uint64, note []byte) error

	// AddCosignature stores one witness signature line for the checkpoint
	// of size; storing the same line twice is not an error.
	AddCosignature(ctx context.Context, size uint64, line []byte) error
}

// Reader is every read of the log: its size, leaves and tiles, where a
// session's leaves are, and its signed checkpoints with their
// cosignatures.
type Reader interface {
	TileReader

	// Size returns the number of leaves.
	Size(ctx context.Context) (uint64, error)

	// LeafIndexByPosition returns the leaf index of the entry at position of
	// session; ErrNotFound if it has no leaf (yet).
	LeafIndexByPosition(ctx context.Context, sessionID string, position int64) (uint64, error)

	// SessionLeaves returns up to limit leaves whose data names sessionID,
	// with index in [from, to), lowest index first. The session is read
	// from each leaf's own data, never from the entries, so that a leaf
	// whose entry is gone is still found.
	SessionLeaves(ctx context.Context, sessionID string, from, to uint64, limit int) ([]IndexedLeaf, error)

	// LastSessionLeaf returns the leaf naming sessionID with the highest
	// index below to; ErrNotFound if there is none.
	LastSessionLeaf(ctx context.Context, sessionID string, to uint64) (IndexedLeaf, error)

	// LeafIndexByEntryHash returns the lowest leaf index whose entry_hash is
	// h; ErrNotFound if there is none.
	LeafIndexByEntryHash(ctx context.Context, h [HashSize]byte) (uint64, error)

	// LatestCheckpoint returns the signed checkpoint note the log last
	// stored; ErrNotFound before the first.
	LatestCheckpoint(ctx context.Context) ([]byte, error)

	// Checkpoint returns the stored checkpoint note for size; ErrNotFound if
	// none was signed at that size.
	Checkpoint(ctx context.Context, size uint64) ([]byte, error)

	// FirstCheckpointCovering returns the smallest stored checkpoint whose
	// tree holds leaf index (size > index), and its size: the checkpoint
	// that first covered the leaf. ErrNotFound if none does yet.
	FirstCheckpointCovering(ctx context.Context, index uint64) (uint64, []byte, error)

	// Cosignatures returns the stored signature lines for size, oldest first.
	Cosignatures(ctx context.Context, size uint64) ([][]byte, error)
}

// TileReader reads the hashes of the tree: what proofs and tiles are
// built from.
type TileReader interface {
	// Leaves returns the data of leaves [start, end); ErrNotFound if any is
	// missing.
	Leaves(ctx context.Context, start, end uint64) ([][]byte, error)

	// FullTile returns the 256 packed hashes of tile (level, n); ErrNotFound
	// if the tile is not complete.
	FullTile(ctx context.Context, level int, n uint64) ([]byte, error)

	// TileRoots returns the packed Roots of full tiles (level, from..to-1);
	// ErrNotFound if any is missing.
	TileRoots(ctx context.Context, level int, from, to uint64) ([]byte, error)
}
