package trace

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkEncode encodes entries of about 1 KiB (acs/testdata's bench
// entry, a deny so that OCSF writes its Detection Finding too) as NDJSON
// lines to a file, and beside it, in the same run, writes the same entries
// raw as NDJSON to a file: the floor any export pays. It reports entries
// per second for both and their ratio.
func BenchmarkEncode(b *testing.B) {
	entry, err := os.ReadFile("../testdata/bench_entry.json")
	if err != nil {
		b.Fatal(err)
	}
	entry = compact(entry)
	li := uint64(123456)
	ev := Evidence{Origin: "ledger.example/acs", SessionID: "sess_7Jm2Q", AgentID: "agent-7", Position: 42,
		EntryHash: testHash, LeafIndex: &li, Source: "guardian", Entry: entry,
		Response: []byte(`{"jsonrpc":"2.0","id":42,"result":{"type":"final","acs_version":"0.1.0","request_id":"req-2026-11-30-000042","decision":"deny","reason_codes":[],"chain_hash":"` + testHash + `","signature":{"algorithm":"HMAC-SHA256","key_id":"k","value":"AAAA"}}}`)}
	const n = 20000
	run := func(b *testing.B, write func(w io.Writer) error) float64 {
		f, err := os.Create(filepath.Join(b.TempDir(), "out.ndjson"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		w := bufio.NewWriterSize(f, 256<<10)
		start := time.Now()
		for range n {
			if err := write(w); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		return n / time.Since(start).Seconds()
	}
	raw := func(w io.Writer) error {
		if _, err := w.Write(entry); err != nil {
			return err
		}
		_, err := w.Write([]byte{'\n'})
		return err
	}
	for _, f := range Formats {
		b.Run(fmt.Sprintf("format=%s", f), func(b *testing.B) {
			var rawRate, ourRate float64
			for b.Loop() {
				rawRate += run(b, raw)
				ourRate += run(b, func(w io.Writer) error {
					evs, err := EncodeAll(f, ev, Options{})
					if err != nil {
						return err
					}
					for _, e := range evs {
						if _, err := w.Write(e); err != nil {
							return err
						}
						if _, err := w.Write([]byte{'\n'}); err != nil {
							return err
						}
					}
					return nil
				})
			}
			b.ReportMetric(ourRate/float64(b.N), "entries/s")
			b.ReportMetric(rawRate/float64(b.N), "raw-entries/s")
			b.ReportMetric(ourRate/rawRate, "ratio")
			b.ReportMetric(0, "ns/op")
		})
	}
}
