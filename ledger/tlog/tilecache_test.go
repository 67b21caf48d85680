package tlog

import (
	"fmt"
	"testing"
)

// TestTileCacheKeepsWhatIsUsed: the cache never holds more than its bound,
// and a tile read again and again (an upper level's, shared by every
// proof) stays while tiles read once pass through.
func TestTileCacheKeepsWhatIsUsed(t *testing.T) {
	c := newTileCache(4)
	tile := func(level int, n uint64) []byte { return fmt.Appendf(nil, "%d/%d", level, n) }
	c.put(1, 0, tile(1, 0))
	for n := range uint64(100) {
		c.put(0, n, tile(0, n))
		if got := c.get(1, 0); string(got) != "1/0" {
			t.Fatalf("after tile 0/%d: the hot tile 1/0 is %q, want it kept", n, got)
		}
		if c.len() > 4 {
			t.Fatalf("after tile 0/%d the cache holds %d tiles, bound 4", n, c.len())
		}
	}
	// The newest three level-0 tiles stay, the older ones are gone.
	for n := range uint64(100) {
		got := c.get(0, n)
		if want := n >= 97; (got != nil) != want {
			t.Errorf("tile 0/%d cached: %v, want %v", n, got != nil, want)
		}
		if got != nil && string(got) != string(tile(0, n)) {
			t.Errorf("tile 0/%d is %q", n, got)
		}
	}
	// Putting a tile that is there keeps one copy.
	c.put(0, 99, tile(0, 99))
	if c.len() != 4 {
		t.Errorf("after putting a cached tile again the cache holds %d tiles, want 4", c.len())
	}
}

// len is how many tiles the cache holds.
func (c *tileCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
