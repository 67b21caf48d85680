package tlog

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

func TestLeafMatchesReferenceJCS(t *testing.T) {
	t.Parallel()
	ids := []string{"s", "sess-1", `quote"back\slash`, "tab\tnl\ncr\rff\fbs\b", "\x01\x1f\x7f", "é ü 日本", "\u2028\u2029", "<&>", "emoji \U0001F600"}
	for _, id := range ids {
		l := Leaf{SessionID: id, Position: 9007199254740991, EntryHash: entryHash(id, 1)}
		got, err := l.MarshalJCS()
		if err != nil {
			t.Fatalf("%q: %v", id, err)
		}
		raw, _ := json.Marshal(map[string]any{"v": 1, "session_id": id, "position": l.Position, "entry_hash": hex.EncodeToString(l.EntryHash[:])})
		want, err := jcs.Transform(raw)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("session %q:\n got %s\nwant %s", id, got, want)
		}
		back, err := ParseLeaf(got)
		if err != nil || back != l {
			t.Errorf("session %q: ParseLeaf = %+v, %v", id, back, err)
		}
	}
}

func TestLeafRefusesBadInput(t *testing.T) {
	t.Parallel()
	for name, l := range map[string]Leaf{
		"empty session":   {SessionID: "", Position: 0},
		"invalid utf-8":   {SessionID: "a\xffb", Position: 0},
		"negative":        {SessionID: "s", Position: -1},
		"beyond 2^53 - 1": {SessionID: "s", Position: 1 << 53},
	} {
		if _, err := l.MarshalJCS(); err == nil {
			t.Errorf("%s: MarshalJCS accepted %+v", name, l)
		}
	}
}

func TestParseLeafRefusesNonCanonical(t *testing.T) {
	t.Parallel()
	good, _ := Leaf{SessionID: "s", Position: 3, EntryHash: entryHash("s", 3)}.MarshalJCS()
	h3 := entryHash("s", 3)
	hexOf3 := hex.EncodeToString(h3[:])
	bad := map[string]string{
		"uppercase hex":    strings.Replace(string(good), hexOf3, strings.ToUpper(hexOf3), 1),
		"leading zero":     strings.Replace(string(good), `"position":3`, `"position":03`, 1),
		"extra space":      strings.Replace(string(good), `"v":1`, `"v": 1`, 1),
		"version 2":        strings.Replace(string(good), `"v":1`, `"v":2`, 1),
		"escaped solidus":  strings.Replace(string(good), `"s"`, `"\/"`, 1),
		"trailing newline": string(good) + "\n",
		"unicode escape":   strings.Replace(string(good), `"s"`, `"\u0073"`, 1),
	}
	for name, b := range bad {
		if b == string(good) {
			t.Fatalf("%s: mutation did not change the leaf", name)
		}
		if _, err := ParseLeaf([]byte(b)); err == nil {
			t.Errorf("%s: ParseLeaf accepted %s", name, b)
		}
	}
}

func FuzzLeafRoundTrip(f *testing.F) {
	f.Add("sess", int64(0))
	f.Add("a\"\\\n\u2028", int64(1<<40))
	f.Fuzz(func(t *testing.T, id string, pos int64) {
		l := Leaf{SessionID: id, Position: pos, EntryHash: entryHash(id, pos)}
		b, err := l.MarshalJCS()
		if err != nil {
			return
		}
		back, err := ParseLeaf(b)
		if err != nil || back != l {
			t.Fatalf("round trip of %+v: %+v, %v", l, back, err)
		}
		raw, _ := json.Marshal(map[string]any{"v": 1, "session_id": id, "position": pos, "entry_hash": hex.EncodeToString(l.EntryHash[:])})
		want, err := jcs.Transform(raw)
		if err == nil && !bytes.Equal(b, want) {
			t.Fatalf("JCS mismatch:\n got %s\nwant %s", b, want)
		}
	})
}

// TestSessionTiles: one pair per session per tile of 256 leaves, in order
// of first appearance, counting indexes from start.
func TestSessionTiles(t *testing.T) {
	var leaves []StoredLeaf
	for _, s := range []string{"a", "a", "b", "a", "c"} {
		leaves = append(leaves, StoredLeaf{SessionID: s})
	}
	got := SessionTiles(254, leaves) // leaves 254..258: tiles 0 and 1
	want := []SessionTile{{"a", 0}, {"b", 1}, {"a", 1}, {"c", 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("SessionTiles = %v, want %v", got, want)
	}
}
