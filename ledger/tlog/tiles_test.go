package tlog

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	sumtlog "golang.org/x/mod/sumdb/tlog"
)

// sumdb/tlog writes the pre-C2SP path "tile/8/L/N"; C2SP dropped the height.
func c2spPathFromSumdb(t sumtlog.Tile) string {
	return "tile/" + strings.TrimPrefix(t.Path(), "tile/8/")
}

func TestTilePathMatchesSumdb(t *testing.T) {
	t.Parallel()
	for _, n := range []int64{0, 1, 999, 1000, 1001, 999999, 1000000, 1234067, 1<<40 + 7} {
		for _, level := range []int{0, 1, 3} {
			for _, w := range []int{1, 17, 255, 256} {
				want := c2spPathFromSumdb(sumtlog.Tile{H: 8, L: level, N: n, W: w})
				got := TilePath(level, uint64(n), w)
				if got != want {
					t.Errorf("TilePath(%d, %d, %d) = %q, want %q", level, n, w, got, want)
				}
				l2, n2, w2, err := ParseTilePath(got)
				if err != nil || l2 != level || n2 != uint64(n) || w2 != w {
					t.Errorf("ParseTilePath(%q) = %d %d %d %v", got, l2, n2, w2, err)
				}
			}
		}
	}
	if got, want := TilePath(EntriesLevel, 1234067, 7), "tile/entries/x001/x234/067.p/7"; got != want {
		t.Errorf("entries path %q, want %q", got, want)
	}
}

func TestParseTilePathRefusesMalformed(t *testing.T) {
	t.Parallel()
	for _, p := range []string{
		"tile/0/1", "tile/0/0001", "tile/0/x000/001", "tile/0/001/002", "tile/0/x1/002",
		"tile/8/000", "tile/00/000", "tile/a/000", "tile/0/000.p/0", "tile/0/000.p/256",
		"tile/0/000.p/01", "tile/0/000.p/", "tile/0/000/", "tiles/0/000", "tile/0/x001",
		"tile/0/x999/x999/x999/x999/x999/x999/x999/999", "tile/entries/00a", "tile/0/-01",
	} {
		if _, _, _, err := ParseTilePath(p); !errors.Is(err, ErrBadTilePath) {
			t.Errorf("ParseTilePath(%q) = %v, want ErrBadTilePath", p, err)
		}
	}
}

func TestBundleRoundTrip(t *testing.T) {
	t.Parallel()
	leaves := [][]byte{[]byte("a"), {}, bytes.Repeat([]byte{0xff}, 300)}
	var b []byte
	for _, l := range leaves {
		var err error
		if b, err = AppendBundleEntry(b, l); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(b[:3], []byte{0, 1, 'a'}) || !bytes.Equal(b[5:7], []byte{0x01, 0x2c}) {
		t.Fatalf("length prefixes are not 2-byte big-endian: % x", b[:8])
	}
	got, err := ParseBundle(b)
	if err != nil || len(got) != 3 || !bytes.Equal(got[2], leaves[2]) {
		t.Fatalf("ParseBundle = %q, %v", got, err)
	}
	if _, err := ParseBundle(b[:len(b)-1]); err == nil {
		t.Error("truncated bundle accepted")
	}
	if _, err := AppendBundleEntry(nil, make([]byte, 1<<16)); err == nil {
		t.Error("64 KiB leaf accepted")
	}
}

func TestHashesMatchSumdb(t *testing.T) {
	t.Parallel()
	a, b := LeafHash([]byte("x")), LeafHash([]byte("y"))
	if sumtlog.Hash(a) != sumtlog.RecordHash([]byte("x")) {
		t.Fatal("LeafHash differs from sumdb RecordHash")
	}
	if got := nodeHash(a[:], b[:]); !bytes.Equal(got, func() []byte { h := sumtlog.NodeHash(a, b); return h[:] }()) {
		t.Fatal("nodeHash differs from sumdb NodeHash")
	}
}
