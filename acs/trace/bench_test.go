package trace

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

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
	// run writes n entries with write and returns the rate and the CPU
	// time per entry, which the box's other load moves less than the rate.
	run := func(b *testing.B, write func(w io.Writer) error) (float64, time.Duration) {
		f, err := os.Create(filepath.Join(b.TempDir(), "out.ndjson"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		w := bufio.NewWriterSize(f, 256<<10)
		start, cpu := time.Now(), cpuTime()
		for range n {
			if err := write(w); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		return n / time.Since(start).Seconds(), (cpuTime() - cpu) / n
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
			var rawCPU, ourCPU time.Duration
			for b.Loop() {
				r, c := run(b, raw)
				rawRate, rawCPU = rawRate+r, rawCPU+c
				r, c = run(b, func(w io.Writer) error {
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
				ourRate, ourCPU = ourRate+r, ourCPU+c
			}
			b.ReportMetric(ourRate/float64(b.N), "entries/s")
			b.ReportMetric(rawRate/float64(b.N), "raw-entries/s")
			b.ReportMetric(ourRate/rawRate, "ratio")
			b.ReportMetric(float64(ourCPU.Nanoseconds())/float64(b.N)/1e3, "cpu-µs/entry")
			b.ReportMetric(float64(rawCPU.Nanoseconds())/float64(b.N)/1e3, "raw-cpu-µs/entry")
			b.ReportMetric(0, "ns/op")
		})
	}
}
