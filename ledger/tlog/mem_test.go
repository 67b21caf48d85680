package tlog

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
)

// memStorage is an in-memory Storage for the log's own tests and for
// benchmarks that measure the log's own work without a database. It
// follows the Storage contract; the stores' storage is tested by
// ledger/tlog/tlogstoretest.
type memStorage struct {
	mu      sync.Mutex
	pending []PendingEntry
	leaves  [][]byte
	byHash  map[[HashSize]byte]uint64
	tiles   map[[2]uint64]FullTile
	cps     map[uint64][]byte
	head    []byte
	headSz  uint64
	cosigs  map[uint64][][]byte
}

var (
	_ Writer = (*memStorage)(nil)
	_ Reader = (*memStorage)(nil)
)

// storage is m as the log's Storage, its Writer and its Reader.
func (m *memStorage) storage() Storage { return Storage{Writer: m, Reader: m} }

func newMemStorage() *memStorage {
	return &memStorage{byHash: map[[HashSize]byte]uint64{}, tiles: map[[2]uint64]FullTile{}, cps: map[uint64][]byte{}, cosigs: map[uint64][][]byte{}}
}

func (m *memStorage) Pending(_ context.Context, after int64, limit int) ([]PendingEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, _ := slices.BinarySearchFunc(m.pending, after+1, func(p PendingEntry, id int64) int { return cmp.Compare(p.EntryID, id) })
	return m.pending[i:min(i+limit, len(m.pending))], nil
}

func (m *memStorage) Integrate(_ context.Context, start uint64, leaves []StoredLeaf, tiles []FullTile) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if uint64(len(m.leaves)) != start || len(leaves) > len(m.pending) {
		return ErrConflict
	}
	for i, l := range leaves {
		if m.pending[i].EntryID != l.EntryID {
			return ErrConflict
		}
		m.leaves = append(m.leaves, l.Data)
		m.byHash[l.EntryHash] = start + uint64(i)
	}
	m.pending = m.pending[len(leaves):]
	for _, t := range tiles {
		m.tiles[[2]uint64{uint64(t.Level), t.N}] = t
	}
	return nil
}

func (m *memStorage) Size(context.Context) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return uint64(len(m.leaves)), nil
}

func (m *memStorage) Leaves(_ context.Context, start, end uint64) ([][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if end > uint64(len(m.leaves)) {
		return nil, ErrNotFound
	}
	return m.leaves[start:end], nil
}

func (m *memStorage) FullTile(_ context.Context, level int, n uint64) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tiles[[2]uint64{uint64(level), n}]
	if !ok {
		return nil, ErrNotFound
	}
	return t.Data, nil
}

func (m *memStorage) TileRoots(_ context.Context, level int, from, to uint64) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []byte
	for i := from; i < to; i++ {
		t, ok := m.tiles[[2]uint64{uint64(level), i}]
		if !ok {
			return nil, ErrNotFound
		}
		out = append(out, t.Root[:]...)
	}
	return out, nil
}

func (m *memStorage) LeafIndexByPosition(context.Context, string, int64) (uint64, error) {
	return 0, fmt.Errorf("%w: not indexed in memory", ErrNotFound)
}

// SessionLeaves scans every leaf: the memory store has no index.
func (m *memStorage) SessionLeaves(_ context.Context, sessionID string, from, to uint64, limit int) ([]IndexedLeaf, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []IndexedLeaf
	for i := from; i < min(to, uint64(len(m.leaves))) && len(out) < limit; i++ {
		if l, err := ParseLeaf(m.leaves[i]); err == nil && l.SessionID == sessionID {
			out = append(out, IndexedLeaf{Index: i, Data: m.leaves[i]})
		}
	}
	return out, nil
}

func (m *memStorage) LastSessionLeaf(_ context.Context, sessionID string, to uint64) (IndexedLeaf, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := min(to, uint64(len(m.leaves))); i > 0; i-- {
		if l, err := ParseLeaf(m.leaves[i-1]); err == nil && l.SessionID == sessionID {
			return IndexedLeaf{Index: i - 1, Data: m.leaves[i-1]}, nil
		}
	}
	return IndexedLeaf{}, ErrNotFound
}

func (m *memStorage) LeafIndexByEntryHash(_ context.Context, h [HashSize]byte) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, ok := m.byHash[h]
	if !ok {
		return 0, ErrNotFound
	}
	return i, nil
}

func (m *memStorage) LatestCheckpoint(context.Context) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.head == nil {
		return nil, ErrNotFound
	}
	return m.head, nil
}

func (m *memStorage) SwapCheckpoint(_ context.Context, hasOld bool, oldSize, size uint64, note []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.cps[size]; ok || hasOld != (m.head != nil) || (hasOld && m.headSz != oldSize) {
		return ErrConflict
	}
	m.cps[size], m.head, m.headSz = note, note, size
	return nil
}

func (m *memStorage) Checkpoint(_ context.Context, size uint64) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n, ok := m.cps[size]; ok {
		return n, nil
	}
	return nil, ErrNotFound
}

func (m *memStorage) FirstCheckpointCovering(_ context.Context, index uint64) (uint64, []byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	best := uint64(0)
	for size := range m.cps {
		if size > index && (best == 0 || size < best) {
			best = size
		}
	}
	if best == 0 {
		return 0, nil, ErrNotFound
	}
	return best, m.cps[best], nil
}

func (m *memStorage) AddCosignature(_ context.Context, size uint64, line []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cosigs[size] = append(m.cosigs[size], line)
	return nil
}

func (m *memStorage) Cosignatures(_ context.Context, size uint64) ([][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cosigs[size], nil
}

// addPending queues n entries for leaves from..from+n-1, with entry ids one
// higher (database ids start at 1).
func (m *memStorage) addPending(from, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := from; i < from+n; i++ {
		m.pending = append(m.pending, PendingEntry{EntryID: i + 1, Leaf: Leaf{SessionID: fmt.Sprintf("sess-%d", i/100), Position: i % 100, EntryHash: entryHash("b", i)}})
	}
}
