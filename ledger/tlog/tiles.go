package tlog

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// C2SP tlog-tiles fixes the tile height at 8: a tile holds up to 256 hashes of
// one tree level, and tile level L holds hashes of tree level 8*L.
const (
	TileHeight = 8
	TileWidth  = 1 << TileHeight
	HashSize   = sha256.Size
)

// EntriesLevel is the pseudo-level [ParseTilePath] returns for entry bundles
// (tile/entries/...), which hold leaf data instead of hashes.
const EntriesLevel = -1

// maxTileLevel bounds L so that 8*L stays below 64 bits of tree size.
const maxTileLevel = 7

// TilePath returns the C2SP path of tile (level, n) of the given width:
// "tile/<L>/<N>" for a full tile, "tile/<L>/<N>.p/<W>" for a partial one.
// Level [EntriesLevel] names an entry bundle, "tile/entries/<N>[.p/<W>]".
func TilePath(level int, n uint64, width int) string {
	var b strings.Builder
	b.WriteString("tile/")
	if level == EntriesLevel {
		b.WriteString("entries")
	} else {
		b.WriteString(strconv.Itoa(level))
	}
	b.WriteByte('/')
	b.WriteString(encodeTileIndex(n))
	if width < TileWidth {
		b.WriteString(".p/")
		b.WriteString(strconv.Itoa(width))
	}
	return b.String()
}

// encodeTileIndex writes n in groups of three decimal digits, every group but
// the last prefixed with "x" (tlog-tiles: 1234067 is x001/x234/067).
func encodeTileIndex(n uint64) string {
	groups := []string{fmt.Sprintf("%03d", n%1000)}
	for n /= 1000; n > 0; n /= 1000 {
		groups = append(groups, fmt.Sprintf("x%03d", n%1000))
	}
	for i, j := 0, len(groups)-1; i < j; i, j = i+1, j-1 {
		groups[i], groups[j] = groups[j], groups[i]
	}
	return strings.Join(groups, "/")
}

// ErrBadTilePath is wrapped by every [ParseTilePath] error.
var ErrBadTilePath = errors.New("malformed tile path")

// ParseTilePath parses a path made by [TilePath]. It accepts exactly one
// spelling per tile: no leading zeros beyond the three-digit groups, no
// zero-valued leading "x" group, and a partial width of 1..255.
func ParseTilePath(path string) (level int, n uint64, width int, err error) {
	bad := func(why string) (int, uint64, int, error) {
		return 0, 0, 0, fmt.Errorf("%w %q: %s", ErrBadTilePath, path, why)
	}
	rest, ok := strings.CutPrefix(path, "tile/")
	if !ok {
		return bad(`does not start with "tile/"`)
	}
	levelStr, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return bad("no tile index")
	}
	if levelStr == "entries" {
		level = EntriesLevel
	} else {
		if len(levelStr) != 1 || levelStr[0] < '0' || levelStr[0] > '0'+maxTileLevel {
			return bad("level must be a single digit 0..7 or \"entries\"")
		}
		level = int(levelStr[0] - '0')
	}
	width = TileWidth
	if idx, w, ok := strings.Cut(rest, ".p/"); ok {
		rest = idx
		if len(w) == 0 || len(w) > 3 || w[0] == '0' {
			return bad("partial width must be 1..255 without leading zeros")
		}
		wv, err := strconv.Atoi(w)
		if err != nil || wv < 1 || wv >= TileWidth {
			return bad("partial width must be 1..255")
		}
		width = wv
	}
	groups := strings.Split(rest, "/")
	for i, g := range groups {
		last := i == len(groups)-1
		if !last {
			var ok bool
			if g, ok = strings.CutPrefix(g, "x"); !ok {
				return bad(`every index group but the last must start with "x"`)
			}
			if i == 0 && g == "000" {
				return bad("index has a leading zero group")
			}
		}
		if len(g) != 3 || strings.Trim(g, "0123456789") != "" {
			return bad("index groups must be three decimal digits")
		}
		d, _ := strconv.ParseUint(g, 10, 64)
		if n > (1<<64-1-d)/1000 {
			return bad("index overflows 64 bits")
		}
		n = n*1000 + d
	}
	return level, n, width, nil
}

// AppendBundleEntry appends one leaf to an entry bundle: tlog-tiles frames
// each entry with its length as a big-endian uint16.
func AppendBundleEntry(bundle, leaf []byte) ([]byte, error) {
	if len(leaf) > 0xffff {
		return nil, fmt.Errorf("leaf of %d bytes does not fit a 16-bit length prefix", len(leaf))
	}
	bundle = binary.BigEndian.AppendUint16(bundle, uint16(len(leaf)))
	return append(bundle, leaf...), nil
}

// ParseBundle splits an entry bundle into its leaves.
func ParseBundle(bundle []byte) ([][]byte, error) {
	var leaves [][]byte
	for off := 0; off < len(bundle); {
		if len(bundle)-off < 2 {
			return nil, fmt.Errorf("entry bundle: truncated length prefix at byte %d", off)
		}
		n := int(binary.BigEndian.Uint16(bundle[off:]))
		off += 2
		if len(bundle)-off < n {
			return nil, fmt.Errorf("entry bundle: entry %d at byte %d claims %d bytes, %d left", len(leaves), off-2, n, len(bundle)-off)
		}
		leaves = append(leaves, bundle[off:off+n])
		off += n
	}
	return leaves, nil
}

// LeafHash is the RFC 6962 §2.1 leaf hash, SHA-256(0x00 || leaf).
func LeafHash(leaf []byte) [HashSize]byte {
	h := sha256.New()
	h.Write([]byte{0})
	h.Write(leaf)
	var out [HashSize]byte
	h.Sum(out[:0])
	return out
}

// nodeHash is the RFC 6962 §2.1 interior hash, SHA-256(0x01 || left || right).
func nodeHash(left, right []byte) []byte {
	var buf [1 + 2*HashSize]byte
	buf[0] = 1
	copy(buf[1:], left)
	copy(buf[1+HashSize:], right)
	sum := sha256.Sum256(buf[:])
	return sum[:]
}

// subtreeHash reduces a power-of-two run of same-level hashes (packed, 32
// bytes each) to the root of the perfect subtree they span.
func subtreeHash(hashes []byte) []byte {
	n := len(hashes) / HashSize
	if n == 1 {
		return append([]byte(nil), hashes...)
	}
	level := append([]byte(nil), hashes...)
	for ; n > 1; n /= 2 {
		for i := 0; i < n/2; i++ {
			copy(level[i*HashSize:], nodeHash(level[2*i*HashSize:(2*i+1)*HashSize], level[(2*i+1)*HashSize:(2*i+2)*HashSize]))
		}
	}
	return level[:HashSize]
}
