package tlog

import (
	"container/list"
	"sync"
)

// tileCacheSize is how many full tiles a log keeps in memory: 1,024 tiles
// of 8 KiB, 8 MiB. Proofs near the head of a log read its upper levels'
// tiles, which every proof shares, and the few newest tiles of level 0;
// those stay, and a tile read once for an old leaf's proof leaves again.
const tileCacheSize = 1024

// tileCache keeps the full tiles read last, which never change, so proofs
// near the head of a large log do not refetch the same few tiles. It holds
// at most max tiles and evicts the least recently used: the memory it
// takes reaches its bound and stays there, and the tiles every proof reads
// (the upper levels) are not thrown out with the rest.
type tileCache struct {
	mu    sync.Mutex
	max   int
	tiles map[tileKey]*list.Element // of *cachedTile
	order list.List                 // front: used last
}

type tileKey struct {
	level int
	n     uint64
}

type cachedTile struct {
	key  tileKey
	data []byte
}

func newTileCache(max int) *tileCache {
	return &tileCache{tiles: make(map[tileKey]*list.Element), max: max}
}

func (c *tileCache) get(level int, n uint64) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.tiles[tileKey{level, n}]
	if !ok {
		return nil
	}
	c.order.MoveToFront(e)
	return e.Value.(*cachedTile).data
}

func (c *tileCache) put(level int, n uint64, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := tileKey{level, n}
	if e, ok := c.tiles[k]; ok {
		c.order.MoveToFront(e)
		return
	}
	if c.order.Len() >= c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.tiles, last.Value.(*cachedTile).key)
	}
	c.tiles[k] = c.order.PushFront(&cachedTile{k, data})
}
