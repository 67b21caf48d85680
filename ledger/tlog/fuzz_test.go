package tlog

import (
	"bytes"
	"testing"
)

func FuzzParseTilePath(f *testing.F) {
	f.Add("tile/0/x001/x234/067.p/7")
	f.Add("tile/entries/000")
	f.Fuzz(func(t *testing.T, p string) {
		level, n, w, err := ParseTilePath(p)
		if err != nil {
			return
		}
		// One spelling per tile: what parses must print back identically.
		if got := TilePath(level, n, w); got != p {
			t.Fatalf("ParseTilePath(%q) = %d %d %d, which prints as %q", p, level, n, w, got)
		}
	})
}

func FuzzParseCheckpoint(f *testing.F) {
	f.Add([]byte(testCheckpoint().Marshal()))
	f.Fuzz(func(t *testing.T, text []byte) {
		cp, err := ParseCheckpoint(text)
		if err != nil {
			return
		}
		if !bytes.Equal(cp.Marshal(), text) {
			t.Fatalf("ParseCheckpoint(%q) re-marshals as %q", text, cp.Marshal())
		}
	})
}

func FuzzParseBundle(f *testing.F) {
	f.Add([]byte{0, 1, 'a', 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		leaves, err := ParseBundle(b)
		if err != nil {
			return
		}
		var out []byte
		for _, l := range leaves {
			out, _ = AppendBundleEntry(out, l)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("bundle %x re-encodes as %x", b, out)
		}
	})
}
