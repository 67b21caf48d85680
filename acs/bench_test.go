package acs

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/gowebpki/jcs"
)

// benchEntry loads the realistic ContextEntry of testdata/bench_entry.json
// (nested objects, escapes, non-BMP text, numbers that need rewriting) in
// the compact form a Guardian sends: about 1 KiB.
func benchEntry(tb testing.TB) []byte {
	tb.Helper()
	raw, err := os.ReadFile("testdata/bench_entry.json")
	if err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func oursEntryHash(in []byte) (Hash, error) {
	e, err := ParseEntry(in)
	if err != nil {
		return Hash{}, err
	}
	return EntryHash(e.Content, e.PreviousHash), nil
}

func gowebpkiEntryHash(in []byte) (Hash, error) {
	c, err := jcs.Transform(in)
	if err != nil {
		return Hash{}, err
	}
	return sha256.Sum256(c), nil
}

// BenchmarkEntryHash compares, on one 1 KiB ContextEntry, our ParseEntry +
// EntryHash with gowebpki/jcs.Transform + SHA-256 (which does less: it
// keeps entry_hash and previous_hash rather than removing them) and with
// SHA-256 alone over the same number of bytes, the floor any
// implementation pays. The sub-benchmarks run in one invocation; "ratio"
// times all three inside one b.N loop and reports the ratios directly, so
// the noise of the shared machine mostly cancels out.
func BenchmarkEntryHash(b *testing.B) {
	in := benchEntry(b)
	for _, impl := range []struct {
		name string
		hash func([]byte) (Hash, error)
	}{
		{"ours", oursEntryHash},
		{"gowebpki", gowebpkiEntryHash},
		{"sha256-floor", func(in []byte) (Hash, error) { return sha256.Sum256(in), nil }},
	} {
		b.Run(impl.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := impl.hash(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("ratio", func(b *testing.B) {
		// Each iteration times a batch of each in turn, so all three see
		// the same machine load; batches keep timer overhead and the
		// cache disturbance of switching small next to SHA-256's 1 us.
		const batch = 8
		var ours, theirs, floor time.Duration
		for b.Loop() {
			t0 := time.Now()
			for range batch {
				if _, err := oursEntryHash(in); err != nil {
					b.Fatal(err)
				}
			}
			t1 := time.Now()
			for range batch {
				if _, err := gowebpkiEntryHash(in); err != nil {
					b.Fatal(err)
				}
			}
			t2 := time.Now()
			for range batch {
				sha256.Sum256(in)
			}
			t3 := time.Now()
			ours += t1.Sub(t0)
			theirs += t2.Sub(t1)
			floor += t3.Sub(t2)
		}
		n := float64(b.N * batch)
		b.ReportMetric(float64(ours.Nanoseconds())/n, "ours-ns/op")
		b.ReportMetric(float64(theirs.Nanoseconds())/n, "gowebpki-ns/op")
		b.ReportMetric(float64(floor.Nanoseconds())/n, "sha256-ns/op")
		b.ReportMetric(float64(theirs)/float64(ours), "x-faster-than-gowebpki")
		b.ReportMetric(float64(ours)/float64(floor), "x-sha256-floor")
	})
}

// BenchmarkCanonicalize measures Canonicalize alone on the same entry.
func BenchmarkCanonicalize(b *testing.B) {
	in := benchEntry(b)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonicalize(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMembers walks the members of a 1 KiB canonical ContextEntry, as
// the Guardian and the verifier do: one member looked up by name (the
// last, so every member before it is skipped) and every member visited.
func BenchmarkMembers(b *testing.B) {
	canon, err := Canonicalize(benchEntry(b))
	if err != nil {
		b.Fatal(err)
	}
	var last []byte
	CanonicalMembers(canon, func(name, _ []byte) bool { last = name; return true })
	b.Run("member", func(b *testing.B) {
		b.SetBytes(int64(len(canon)))
		for b.Loop() {
			if CanonicalMember(canon, string(last)) == nil {
				b.Fatal("no member")
			}
		}
	})
	b.Run("members", func(b *testing.B) {
		b.SetBytes(int64(len(canon)))
		for b.Loop() {
			if !CanonicalMembers(canon, func(_, _ []byte) bool { return true }) {
				b.Fatal("malformed")
			}
		}
	})
}
