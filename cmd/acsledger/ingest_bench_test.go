package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/pgtest"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

// BenchmarkIngestGiB runs `acsledger ingest --format opa` on a 1 GiB
// upload body (a JSON array of ~1.7 million decision events) into
// Postgres and reports the process's peak resident memory, which the batch
// size bounds and the input's size does not.
//
//	go test -run '^$' -bench IngestGiB -benchtime 1x -timeout 60m ./cmd/acsledger/
func BenchmarkIngestGiB(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "upload.json")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteByte('[')
	var n int
	for size := int64(1); size < 1<<30; n++ {
		if n > 0 {
			w.WriteByte(',')
		}
		k, _ := fmt.Fprintf(w, `{"labels":{"id":"opa-gib"},"decision_id":"g-%09d","bundles":{"authz":{"revision":"r1"}},"path":"authz/allow",`+
			`"input":{"session_id":"gib-%03d","user":"user-%d","resource":{"kind":"document","id":"doc-%d"}},"result":{"allow":true},`+
			`"nd_builtin_cache":{"time.now_ns":{"[]":%d}},"timestamp":"2026-12-01T10:00:00.000000000Z"}`,
			n, n%256, n%1000, n, int64(1764583200000000000)+int64(n))
		size += int64(k) + 1
	}
	w.WriteByte(']')
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	fi, _ := os.Stat(path)
	// Without the race detector, which TestMain's binary carries.
	bin := filepath.Join(b.TempDir(), "acsledger")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("%v\n%s", err, out)
	}
	for range b.N {
		db := pgtest.NewDatabase(b)
		if err := storeopen.Migrate(ctx, db); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		cmd := exec.Command(bin, "ingest", "--format", "opa", "--db", db, "--no-anchor", "--batch", "2000", path)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("%v\n%s", err, out)
		}
		secs := time.Since(start).Seconds()
		want := fmt.Sprintf("accepted %d, duplicate 0, quarantined 0\n", n)
		if string(out) != want {
			b.Fatalf("output %q, want %q", out, want)
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MiB")
		b.ReportMetric(float64(fi.Size())/(1<<20), "input-MiB")
		b.ReportMetric(float64(n)/secs, "entries/s")
	}
}
