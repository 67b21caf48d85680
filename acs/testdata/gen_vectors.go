//go:build ignore

// Command gen_vectors writes testdata/entry_vectors.json: chains of
// ContextEntries with the content bytes and entry_hash that ACS §8.2
// prescribes, computed with an independent oracle (gowebpki/jcs for RFC 8785,
// crypto/sha256 for the hash). It is deterministic: the same source makes
// the same file.
//
// Each entry is written twice from one random structure: once as submitted
// (members in random order, random whitespace and escapes, with its
// entry_hash and previous_hash members), and once without the two chain
// links, which the oracle canonicalizes into the expected content bytes.
//
// Run from the acs directory: go run testdata/gen_vectors.go
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/gowebpki/jcs"
)

// vector is one entry of one chain.
type vector struct {
	Chain        int     `json:"chain"`
	Index        int     `json:"index"`
	Entry        string  `json:"entry"`
	Content      string  `json:"content"`
	EntryHash    string  `json:"entry_hash"`
	PreviousHash *string `json:"previous_hash"`
}

type member struct {
	name string // as written in JSON, escapes included
	val  string // the value's JSON text
}

var rng = rand.New(rand.NewPCG(0x8785, 0xac5))

func pick[T any](xs []T) T { return xs[rng.IntN(len(xs))] }

// names spans ASCII, escapes, and the UTF-16 ordering traps of RFC 8785
// §3.2.3 (U+E000-U+FFFF against characters beyond U+FFFF).
var names = []string{
	"a", "b", "A", "Z", "_", "aa", "ab", "a b", "args", "tool", "name",
	"\\u0061x", "\\n", "\\u0000", "\\\"q\\\"", "\\/slash", "é", "\\u00e9t\\u00e9",
	"\\u20ac", "€uro", "\\ufb33", "\uffff", "\ue000", "😀", "\\ud83d\\ude00x",
	"\U00010000", "entry_hash", "previous_hash", "entry_id", "step_type",
	"1", "10", "9", "", "long_member_name_that_spans_more_than_eight_bytes",
	"long_member_name_that_spans_more_than_eight_bytez",
}

var strs = []string{
	"", "plain text", "tab\\there", "quote \\\" and backslash \\\\",
	"\\u0001\\u001f\\u007f", "\\b\\f\\n\\r\\t", "\\/path\\/to", "caf\\u00e9 café",
	"\\ud83d\\ude00 😀 \\uD834\\uDD1E", "\u2028\u2029", "\\u2028", "日本語テキスト",
	"grep -rn \\\"TODO\\\" src/ | head\\n", "\\uffff\\ufeff", "\\u0000nul",
	"steps/toolCallRequest", "2026-11-30T05:12:44.318Z",
}

var nums = []string{
	"0", "-0", "1", "-1", "42", "0.5", "-0.25", "1.50", "100", "1e2", "1E2",
	"1e21", "1e+21", "999999999999999999999", "1e-6", "1e-7", "0.000001",
	"0.0000001", "5e-324", "1.7976931348623157e308", "-1.7976931348623157e308",
	"9007199254740992", "9007199254740993", "123456789012345678", "0.1",
	"0.30000000000000004", "333333333.33333329", "4.50", "2e-3", "1e-27",
	"1e30", "1.75e1", "0.8125", "3.141592653589793", "-1e-400", "12345.6789e-3",
}

func space() string {
	if rng.IntN(3) > 0 {
		return ""
	}
	return pick([]string{" ", "\n", "\t", "\r\n  ", "  "})
}

func value(depth int) string {
	k := rng.IntN(10)
	if depth >= 4 {
		k = rng.IntN(6)
	}
	switch k {
	case 0, 1:
		return `"` + pick(strs) + `"`
	case 2, 3:
		return pick(nums)
	case 4:
		return pick([]string{"true", "false", "null"})
	case 5:
		return `"` + pick(strs) + `"`
	case 6, 7:
		return object(depth+1, randomMembers(depth+1, rng.IntN(6)))
	default:
		n := rng.IntN(5)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = space() + value(depth+1) + space()
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
}

// randomMembers makes n members with distinct names (after unescaping).
func randomMembers(depth, n int) []member {
	seen := map[string]bool{}
	var ms []member
	for len(ms) < n {
		name := pick(names)
		var decoded string
		if err := json.Unmarshal([]byte(`"`+name+`"`), &decoded); err != nil {
			log.Fatalf("name %q: %v", name, err)
		}
		if seen[decoded] {
			continue
		}
		seen[decoded] = true
		ms = append(ms, member{name, value(depth)})
	}
	return ms
}

func object(depth int, ms []member) string {
	rng.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = space() + `"` + m.name + `"` + space() + ":" + space() + m.val + space()
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func hexString() string {
	var b [32]byte
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return hex.EncodeToString(b[:])
}

func main() {
	var vectors []vector
	for chain := 0; chain < 12; chain++ {
		var prev *string
		for index := 0; index < 5; index++ {
			content := []member{
				{"entry_id", fmt.Sprintf(`"e-%d-%d"`, chain, index)},
				{"step_id", fmt.Sprintf(`"req-%04d"`, rng.IntN(10000))},
				{"step_type", `"` + pick([]string{"steps/toolCallRequest", "protocols/MCP/tools/call", "agbom/snapshot", "intent_extension", "st\\u0065ps/x"}) + `"`},
			}
			if rng.IntN(4) > 0 {
				content = append(content, member{"timestamp", fmt.Sprintf(`"2026-11-30T05:%02d:%02d.%03dZ"`, index, rng.IntN(60), rng.IntN(1000))})
			}
			if rng.IntN(4) > 0 {
				content = append(content, member{"request_hash", `"` + hexString() + `"`})
			}
			for _, m := range randomMembers(1, 2+rng.IntN(6)) {
				if m.name == "entry_hash" || m.name == "previous_hash" || m.name == "entry_id" || m.name == "step_type" {
					// Nested members of these names are content; top-level
					// ones are the entry's own.
					m.val = object(2, []member{{m.name, m.val}})
					m.name = "nested"
				}
				content = append(content, m)
			}
			// Deduplicate "nested" introduced above.
			seen := map[string]bool{}
			dedup := content[:0]
			for _, m := range content {
				if !seen[m.name] {
					seen[m.name] = true
					dedup = append(dedup, m)
				}
			}
			content = dedup

			want, err := jcs.Transform([]byte(object(1, append([]member(nil), content...))))
			if err != nil {
				log.Fatalf("oracle: %v", err)
			}
			d := sha256.New()
			d.Write(want)
			if prev != nil {
				p, _ := hex.DecodeString(*prev)
				d.Write(p)
			}
			entryHash := hex.EncodeToString(d.Sum(nil))

			full := append([]member(nil), content...)
			switch {
			case prev != nil:
				full = append(full, member{"previous_hash", `"` + *prev + `"`})
			case rng.IntN(2) == 0:
				// ACS §8.2: null and absent both mean "first entry".
				full = append(full, member{"previous_hash", "null"})
			}
			if rng.IntN(5) > 0 {
				full = append(full, member{"entry_hash", `"` + entryHash + `"`})
			}
			vectors = append(vectors, vector{
				Chain:        chain,
				Index:        index,
				Entry:        space() + object(0, full) + space(),
				Content:      string(want),
				EntryHash:    entryHash,
				PreviousHash: prev,
			})
			h := entryHash
			prev = &h
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(vectors); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("testdata/entry_vectors.json", buf.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
