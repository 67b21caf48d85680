package verify

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

const benchSession = "sess-bench-0001"

// benchBundle writes a valid bundle of n entries to w as a stream, holding
// no more than one entry at a time: one policy bundle, one checkpoint
// signed by the log key, the anchor of the last entry, an HMAC-signed
// response per entry when withResponses, and the entries. Each entry is
// written in RFC 8785 form so that its hash is computed without a parser.
// layout is "entries" (no responses), "responses" (all responses, then
// all entries) or "steps" (each response beside its entry).
func benchBundle(tb testing.TB, w io.Writer, n int, layout string, logSigner note.Signer, respKey *sig.PrivateKey) {
	bw := bufio.NewWriterSize(w, 256<<10)
	signer, err := respKey.Signer(benchSession)
	if err != nil {
		tb.Fatal(err)
	}
	// content returns entry i's content bytes (RFC 8785, no chain links).
	buf := make([]byte, 0, 1024)
	content := func(i int) []byte {
		rh := sha256.Sum256([]byte{byte(i), byte(i >> 8), byte(i >> 16)})
		buf = fmt.Appendf(buf[:0], `{"decision":{"disposition":"allow","policy_references":[{"policy_id":"acme-agent-policy","policy_version":"2026.03.2","rule_id":"default_allow"}],"reason_codes":[],"reasoning":"Reading a report is within the session's intent."},"entry_id":"e-%08d","request_hash":"%x","step_id":"s-%08d","step_type":"steps/toolCallRequest","timestamp":"2026-03-14T14:%02d:%02d.%03dZ"}`,
			i, rh, i, i/60000%60, i/1000%60, i%1000)
		return buf
	}
	// chain calls f with each entry's index, content and hash, in order.
	chain := func(f func(i int, c []byte, prev *acs.Hash, h acs.Hash)) {
		var prev *acs.Hash
		var ph acs.Hash
		for i := range n {
			c := content(i)
			h := acs.EntryHash(c, prev)
			f(i, c, prev, h)
			ph = h
			prev = &ph
		}
	}
	leaf := func(i int, h acs.Hash) []byte {
		l := fmt.Appendf(nil, `{"entry_hash":"%s","position":%d,"session_id":%q,"v":1}`, h, i, benchSession)
		return rfc6962.DefaultHasher.HashLeaf(l)
	}

	// Pass 1: the log (this session's leaves only), its root, and the
	// inclusion proof of the last leaf: the roots of the perfect subtrees
	// to its left, nearest first.
	rf := compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	cr := rf.NewEmptyRange(0)
	var path [][]byte
	chain(func(i int, _ []byte, _ *acs.Hash, h acs.Hash) {
		if i == n-1 {
			for _, x := range cr.Hashes() {
				path = append([][]byte{x}, path...)
			}
		}
		if err := cr.Append(leaf(i, h), nil); err != nil {
			tb.Fatal(err)
		}
	})
	root, err := cr.GetRootHash(nil)
	if err != nil {
		tb.Fatal(err)
	}
	cp, err := note.Sign(&note.Note{Text: fmt.Sprintf("bench.example/log\n%d\n%s\n", n, base64.StdEncoding.EncodeToString(root))}, logSigner)
	if err != nil {
		tb.Fatal(err)
	}
	digest := sha256.Sum256([]byte("policy"))
	fmt.Fprintf(bw, `{"format":"acsledger-evidence-bundle","version":1,"session_id":%q,`+"\n", benchSession)
	fmt.Fprintf(bw, `"policy_bundles":[{"policy_id":"acme-agent-policy","policy_version":"2026.03.2","digest":"%x","recorded_at":"2026-03-01T00:00:00Z"}],`+"\n", digest)
	fmt.Fprintf(bw, `"checkpoints":[%q],`+"\n", cp)
	fmt.Fprintf(bw, `"anchors":[{"position":%d,"leaf_index":%d,"tree_size":%d,"proof":[`, n-1, n-1, n)
	for i, p := range path {
		if i > 0 {
			bw.WriteByte(',')
		}
		fmt.Fprintf(bw, "%q", base64.StdEncoding.EncodeToString(p))
	}
	bw.WriteString("]}],\n")

	response := func(i int, h acs.Hash) {
		// Already in RFC 8785 form: the signed input as it stands.
		env := fmt.Appendf(nil, `{"id":%d,"jsonrpc":"2.0","result":{"acs_version":"0.1.0","chain_hash":"%s","decision":"allow","request_id":"s-%08d","type":"final"}}`, i, h, i)
		mac, err := signer.Sign(env)
		if err != nil {
			tb.Fatal(err)
		}
		fmt.Fprintf(bw, `{"id":%d,"jsonrpc":"2.0","result":{"acs_version":"0.1.0","chain_hash":"%s","decision":"allow","request_id":"s-%08d","signature":{"algorithm":"HMAC-SHA256","key_id":%q,"value":"%s"},"type":"final"}}`,
			i, h, i, respKey.KeyID(), base64.StdEncoding.EncodeToString(mac))
	}
	var hexbuf [64]byte
	entry := func(c []byte, prev *acs.Hash, h acs.Hash) {
		bw.Write(c[:len(c)-1])
		if prev == nil {
			bw.WriteString(`,"previous_hash":null`)
		} else {
			hex.Encode(hexbuf[:], prev[:])
			bw.WriteString(`,"previous_hash":"`)
			bw.Write(hexbuf[:])
			bw.WriteByte('"')
		}
		hex.Encode(hexbuf[:], h[:])
		bw.WriteString(`,"entry_hash":"`)
		bw.Write(hexbuf[:])
		bw.WriteString(`"}`)
	}
	sep := func(i int) {
		if i > 0 {
			bw.WriteString(",\n")
		}
	}
	switch layout {
	case "steps":
		bw.WriteString(`"steps":[` + "\n")
		chain(func(i int, c []byte, prev *acs.Hash, h acs.Hash) {
			sep(i)
			bw.WriteString(`{"entry":`)
			entry(c, prev, h)
			bw.WriteString(`,"response":`)
			response(i, h)
			bw.WriteByte('}')
		})
	case "responses", "entries":
		if layout == "responses" {
			bw.WriteString(`"responses":[` + "\n")
			chain(func(i int, _ []byte, _ *acs.Hash, h acs.Hash) { sep(i); response(i, h) })
			bw.WriteString("],\n")
		}
		bw.WriteString(`"entries":[` + "\n")
		chain(func(i int, c []byte, prev *acs.Hash, h acs.Hash) { sep(i); entry(c, prev, h) })
	default:
		tb.Fatalf("layout %q", layout)
	}
	bw.WriteString("]}\n")
	if err := bw.Flush(); err != nil {
		tb.Fatal(err)
	}
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n atomic.Int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// heapSampler records the largest heap (bytes in live and unswept heap
// objects, runtime/metrics) seen while it runs, every 5 ms.
type heapSampler struct {
	stop chan struct{}
	done chan struct{}
	peak uint64
}

func startHeapSampler() *heapSampler {
	s := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer close(s.done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			s.peak = max(s.peak, sample[0].Value.Uint64())
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *heapSampler) Stop() uint64 {
	close(s.stop)
	<-s.done
	return s.peak
}

// BenchmarkBundleMemory verifies generated bundles of 100,000 and 1,000,000
// entries streamed through a pipe (the bundle is never held whole: a
// 1,000,000-entry bundle is 0.6 to 1.3 GB) and reports the peak heap of the
// whole process, generator included, beside entries/s. Flat memory means
// the 1,000,000-entry figure stays at the 100,000-entry one of the same
// layout in the same run. Layouts: "entries" has no responses (the fork
// index, bounded by ForkWindow, is the only per-entry state); "steps" has
// each signed response beside its entry; "responses" has all responses
// before all entries, so each response's request_id and head are indexed
// until its entry is read: memory grows with the session. The 1,000,000
// cases are skipped with -short.
func BenchmarkBundleMemory(b *testing.B) {
	trust, logSigner, respKey := benchKeys(b)
	for _, n := range []int{100_000, 1_000_000} {
		for _, layout := range []string{"entries", "steps", "responses"} {
			b.Run(fmt.Sprintf("%s/n=%d", layout, n), func(b *testing.B) {
				if n > 100_000 && testing.Short() {
					b.Skip("1,000,000 entries: about a minute")
				}
				var peak uint64
				var size int64
				for range b.N {
					runtime.GC()
					pr, pw := io.Pipe()
					cw := &countingWriter{w: pw}
					go func() {
						benchBundle(b, cw, n, layout, logSigner, respKey)
						pw.Close()
					}()
					s := startHeapSampler()
					r, err := VerifyBundle(pr, trust)
					peak = max(peak, s.Stop())
					if err != nil {
						b.Fatal(err)
					}
					if !r.Verified() || r.Entries != n || len(r.Notices) != boolInt(layout == "entries") {
						b.Fatalf("entries %d, findings %v, notices %v", r.Entries, first(r.Findings), r.Notices)
					}
					size = cw.n.Load()
				}
				b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
				b.ReportMetric(float64(size)/(1<<20), "bundle-MiB")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// benchKeys returns the keys benchBundle signs with and the Trust that
// verifies them: the log key, and the HMAC-SHA256 IKM of the responses, so
// that every response signature is checked.
func benchKeys(tb testing.TB) (*Trust, note.Signer, *sig.PrivateKey) {
	skey, vkey, err := note.GenerateKey(rand.New(rand.NewSource(1)), "bench.example/log")
	if err != nil {
		tb.Fatal(err)
	}
	logSigner, err := note.NewSigner(skey)
	if err != nil {
		tb.Fatal(err)
	}
	respKey, err := sig.NewHMACKey("bench-hmac", []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		tb.Fatal(err)
	}
	keys, err := sig.NewKeySet(respKey.Public())
	if err != nil {
		tb.Fatal(err)
	}
	return &Trust{ResponseKeys: keys, Checkpoint: CheckpointPolicy{LogKeys: []string{vkey}}}, logSigner, respKey
}

// BenchmarkBundleVerify verifies a 20,000-entry "steps" bundle held in
// memory (generated once, read from a bytes.Reader: no pipe, no generator
// in the loop), every response HMAC-signed and its IKM trusted so that
// every signature is checked. In the same loop it replays the same entries,
// as JSON Lines, with VerifyChain: the baseline, since a bundle's chain
// check is that replay. It reports both rates and their ratio; the gap is
// the cost of the step objects, the responses and their signatures, the
// anchors and the policy references.
func BenchmarkBundleVerify(b *testing.B) {
	const n = 20_000
	trust, logSigner, respKey := benchKeys(b)
	var buf bytes.Buffer
	benchBundle(b, &buf, n, "steps", logSigner, respKey)
	bundle := buf.Bytes()
	var doc struct {
		Steps []struct {
			Entry json.RawMessage `json:"entry"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(bundle, &doc); err != nil || len(doc.Steps) != n {
		b.Fatalf("reading the generated bundle: %v, %d steps", err, len(doc.Steps))
	}
	var lines bytes.Buffer
	for _, st := range doc.Steps {
		lines.Write(st.Entry)
		lines.WriteByte('\n')
	}
	chain := lines.Bytes()

	var inBundle, inChain time.Duration
	b.SetBytes(int64(len(bundle)))
	for b.Loop() {
		start := time.Now()
		r, err := VerifyBundle(bytes.NewReader(bundle), trust)
		if err != nil {
			b.Fatal(err)
		}
		if !r.Verified() || r.Entries != n || len(r.Notices) != 0 {
			b.Fatalf("bundle: entries %d, findings %v, notices %v", r.Entries, first(r.Findings), r.Notices)
		}
		mid := time.Now()
		c, err := VerifyChain(bytes.NewReader(chain))
		if err != nil {
			b.Fatal(err)
		}
		if !c.Verified() || c.Entries != n || c.Head != r.Head {
			b.Fatalf("chain: entries %d, findings %v", c.Entries, first(c.Findings))
		}
		inBundle += mid.Sub(start)
		inChain += time.Since(mid)
	}
	bundleRate := float64(n) * float64(b.N) / inBundle.Seconds()
	chainRate := float64(n) * float64(b.N) / inChain.Seconds()
	b.ReportMetric(bundleRate, "bundle-entries/s")
	b.ReportMetric(chainRate, "chain-entries/s")
	b.ReportMetric(bundleRate/chainRate, "bundle/chain")
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func first(fs []Finding) []Finding { return fs[:min(len(fs), 3)] }
