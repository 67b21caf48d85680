package tlog

import (
	"cmp"
	"maps"
	"slices"
)

// Exports for the external test package (bench_test.go, largetree_test.go),
// which runs the log over the stores' storage and checks it with the
// storage suite's helpers (both import ledger/tlog).

// MemStorage is the in-memory Storage.
type MemStorage = memStorage

// NewMemStorage returns an empty in-memory Storage.
func NewMemStorage() *MemStorage { return newMemStorage() }

// Storage is m as the log's Storage, its Writer and its Reader.
func (m *memStorage) Storage() Storage { return m.storage() }

// RangeFactory builds the compact ranges the log appends leaf hashes to.
var RangeFactory = rangeFactory

// AddPending queues n entries for leaves from..from+n-1.
func (m *memStorage) AddPending(from, n int64) { m.addPending(from, n) }

// DropPending empties the queue.
func (m *memStorage) DropPending() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending = nil
}

// Checkpoints returns every stored checkpoint by size.
func (m *memStorage) Checkpoints() map[uint64][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.cps)
}

// Contents returns the stored full tiles, leaves and latest checkpoint.
func (m *memStorage) Contents() (tiles []FullTile, leaves [][]byte, headSize uint64, head []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	tiles = slices.SortedFunc(maps.Values(m.tiles), func(a, b FullTile) int {
		return cmp.Or(cmp.Compare(a.Level, b.Level), cmp.Compare(a.N, b.N))
	})
	return tiles, m.leaves, m.headSz, m.head
}
