package verify

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/acs"
	"github.com/gowebpki/jcs"
)

// benchChain returns a valid chain of n entries as JSON Lines, each line
// 1 KiB long (the root's a little shorter for its null previous_hash).
func benchChain(tb testing.TB, n int) []byte {
	tb.Helper()
	var out bytes.Buffer
	var prev *acs.Hash
	for i := range n {
		body := fmt.Sprintf(`{"entry_id":"%08x-5c1d-4e2a-8b6f-%012x","step_id":"req-%06d","step_type":"steps/toolCallRequest",`+
			`"timestamp":"2026-03-14T14:%02d:%02d.%03dZ","request_hash":"%x","decision":"DENY",`+
			`"reasoning":"The command pipes a downloaded script into a shell — outside the session’s intent \"weekly summary\" and unreviewed.",`+
			`"reason_codes":["intent_violation","remote_code_execution"],`+
			`"policy_references":[{"policy_id":"acme-agent-policy","policy_version":"2026.03.2","rule_id":"no-pipe-to-shell"}],`+
			`"policy_data":{"aarm":{"risk":0.875,"threshold":0.5,"weights":[0.25,1.5e-3,12,-3.75]}},`+
			`"provenance_summary":{"entry_count":%d,"entry_count_by_origin":{"user_input":2,"agent":%d,"tool_output":%d},"max_lineage_depth":2,"origins_seen":["user_input","agent","tool_output"]},`+
			`"pad":"`,
			0x9e1f0000+i, i*17, i, i/60%60, i%60, i%1000, sha256.Sum256([]byte{byte(i), byte(i >> 8)}), i, i/2, i-i/2)
		// Pad the line to 1 KiB: body, then `","previous_hash":"<64 hex>","entry_hash":"<64 hex>"}`.
		body += strings.Repeat("x", max(0, 1024-len(body)-len(`","previous_hash":"","entry_hash":""}`)-128)) + `"}`
		e, err := acs.ParseEntry([]byte(body))
		if err != nil {
			tb.Fatal(err)
		}
		h := acs.EntryHash(e.Content, prev)
		link := "null"
		if prev != nil {
			link = `"` + prev.String() + `"`
		}
		fmt.Fprintf(&out, `%s,"previous_hash":%s,"entry_hash":"%s"}`+"\n", body[:len(body)-1], link, h)
		prev = &h
	}
	return out.Bytes()
}

// replayGowebpki is the same replay as VerifyChain built the plain way:
// encoding/json to split the entry, gowebpki/jcs to canonicalize it. It
// checks entry hashes and links and returns the number of findings.
func replayGowebpki(data []byte) (entries, findings int, err error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 256<<10), MaxLineBytes)
	var link []byte
	for sc.Scan() {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return 0, 0, err
		}
		var stated, prevHex *string
		if err := json.Unmarshal(m["entry_hash"], &stated); err != nil || stated == nil {
			return 0, 0, errors.New("bad entry_hash")
		}
		if raw, ok := m["previous_hash"]; ok {
			if err := json.Unmarshal(raw, &prevHex); err != nil {
				return 0, 0, err
			}
		}
		delete(m, "entry_hash")
		delete(m, "previous_hash")
		b, err := json.Marshal(m)
		if err != nil {
			return 0, 0, err
		}
		content, err := jcs.Transform(b)
		if err != nil {
			return 0, 0, err
		}
		d := sha256.New()
		d.Write(content)
		var prev []byte
		if prevHex != nil {
			if prev, err = hex.DecodeString(*prevHex); err != nil {
				return 0, 0, err
			}
			d.Write(prev)
		}
		if hex.EncodeToString(d.Sum(nil)) != *stated {
			findings++
		}
		if entries > 0 && !bytes.Equal(prev, link) || entries == 0 && prev != nil {
			findings++
		}
		if link, err = hex.DecodeString(*stated); err != nil {
			return 0, 0, err
		}
		entries++
	}
	return entries, findings, sc.Err()
}

// BenchmarkChainReplay replays a chain of 1 KiB entries offline, from
// JSON Lines to findings, with VerifyChain (ours) and with the same replay
// on encoding/json and gowebpki/jcs (gowebpki). Compare entries/s of the
// two within one run; parse+hash is the floor under ours.
func BenchmarkChainReplay(b *testing.B) {
	const n = 2000
	data := benchChain(b, n)
	b.Run("ours", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			r, err := VerifyChain(bytes.NewReader(data))
			if err != nil || !r.Verified() || r.Entries != n {
				b.Fatalf("replay failed: %v %+v", err, r)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	})
	// What VerifyChain cannot avoid: parsing and hashing each entry. The gap
	// between this and ours is the verifier's own cost (reading lines,
	// links, fork index).
	b.Run("parse+hash", func(b *testing.B) {
		lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			for _, l := range lines {
				e, err := acs.ParseEntry(l)
				if err != nil {
					b.Fatal(err)
				}
				acs.EntryHash(e.Content, e.PreviousHash)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	})
	b.Run("gowebpki", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			entries, findings, err := replayGowebpki(data)
			if err != nil || findings != 0 || entries != n {
				b.Fatalf("replay failed: %v, %d entries, %d findings", err, entries, findings)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	})
}

// TestReplayBaselineAgrees keeps the benchmark honest: the baseline replay
// finds the same number of problems as VerifyChain on the corpus.
func TestReplayBaselineAgrees(t *testing.T) {
	t.Parallel()
	data := benchChain(t, 50)
	if e, f, err := replayGowebpki(data); err != nil || e != 50 || f != 0 {
		t.Fatalf("baseline on a valid chain: %d entries, %d findings, %v", e, f, err)
	}
	lines := corpusLines(t, "valid.jsonl")
	if e, f, err := replayGowebpki(bytes.Join(lines, []byte("\n"))); err != nil || e != len(lines) || f != 0 {
		t.Fatalf("baseline on valid.jsonl: %d entries, %d findings, %v", e, f, err)
	}
	tampered := bytes.Join(corpusLines(t, "content_edited.jsonl"), []byte("\n"))
	if _, f, err := replayGowebpki(tampered); err != nil || f != 1 {
		t.Fatalf("baseline on content_edited.jsonl: %d findings, %v; want 1", f, err)
	}
	r, err := VerifyChain(bytes.NewReader(data))
	if err != nil || !r.Verified() {
		t.Fatalf("VerifyChain on the benchmark chain: %v %+v", err, r)
	}
}
