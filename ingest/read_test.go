package ingest

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// genReader yields the pattern repeated until at least total bytes (whole
// patterns), with a run of bigSize bytes 'x' after the first one, then
// end.
type genReader struct {
	pattern, end []byte
	bigSize      int64
	total, off   int64
	big          int64 // bytes of the big record written
	state        int
	pos          int
}

func (g *genReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		switch {
		case g.state == 1 && g.big < g.bigSize:
			k := copy(p[n:], bytes.Repeat([]byte{'x'}, int(min(int64(len(p)-n), g.bigSize-g.big, 1<<16))))
			g.big += int64(k)
			n += k
			continue
		case g.off >= g.total:
			if g.pos < len(g.end) {
				k := copy(p[n:], g.end[g.pos:])
				g.pos += k
				n += k
				continue
			}
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		}
		k := copy(p[n:], g.pattern[g.off%int64(len(g.pattern)):])
		g.off += int64(k)
		n += k
		if g.state == 0 && g.off >= int64(len(g.pattern)) {
			g.state = 1
		}
	}
	return n, nil
}

// peakHeap samples the heap while fn runs and returns its peak.
func peakHeap(fn func()) uint64 {
	runtime.GC()
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	fn()
	close(done)
	return peak.Load()
}

// TestReadBoundedMemory reads 1 GiB inputs: memory stays bounded by
// MaxRecordBytes, not by the input, and a record over the limit is cut
// and reported without stopping the ones after it.
func TestReadBoundedMemory(t *testing.T) {
	const total = 1 << 30
	line := []byte(`{"decision_id":"00000000-0000-4000-8000-000000000001","decision":"allow","source":"opa","command":"ls","rule_ids":[],"evaluated_at":"2026-07-01T14:23:46.000Z"}` + "\n")
	t.Run("jsonl", func(t *testing.T) {
		var records, tooLong int64
		var cut int
		peak := peakHeap(func() {
			for raw := range Lines(&genReader{pattern: line, bigSize: 200 << 20, total: total}, "big.jsonl") {
				if raw.Err != nil {
					if raw.Record == 0 {
						t.Fatal(raw.Err)
					}
					tooLong++
					cut = len(raw.Bytes)
					continue
				}
				records++
			}
		})
		// The 200 MiB run of x joins the second line, which is cut.
		lines := (total + int64(len(line)) - 1) / int64(len(line))
		if tooLong != 1 || cut != MaxRecordBytes || records != lines-1 {
			t.Fatalf("%d records, %d too long (cut to %d)", records, tooLong, cut)
		}
		t.Logf("1 GiB of JSONL plus a 200 MiB line: peak heap %.1f MiB", float64(peak)/(1<<20))
		if peak > 64<<20 {
			t.Fatalf("peak heap %d bytes", peak)
		}
	})
	t.Run("array", func(t *testing.T) {
		elem := []byte(`{"decision_id":"d","labels":{"id":"o"},"timestamp":"2026-12-01T10:00:00Z"},`)
		g := &genReader{pattern: elem, total: total / 4, end: []byte(`{"last":true}]`)}
		var records int64
		peak := peakHeap(func() {
			for raw := range ArrayElements(io.MultiReader(strings.NewReader("["), g), "big.json") {
				if raw.Err != nil {
					t.Fatalf("record %d: %v", raw.Record, raw.Err)
				}
				records++
			}
		})
		if records != (total/4+int64(len(elem))-1)/int64(len(elem))+1 {
			t.Fatalf("%d records", records)
		}
		t.Logf("256 MiB JSON array: peak heap %.1f MiB", float64(peak)/(1<<20))
		if peak > 64<<20 {
			t.Fatalf("peak heap %d bytes", peak)
		}
	})
	t.Run("array with a 1 GiB element", func(t *testing.T) {
		g := &genReader{pattern: []byte(`{"a":"`), total: 6, bigSize: total, end: []byte(`"}]`)}
		var got []Raw
		peak := peakHeap(func() {
			for raw := range ArrayElements(io.MultiReader(strings.NewReader("["), g), "huge.json") {
				got = append(got, raw)
			}
		})
		if len(got) != 1 || got[0].Err == nil || !strings.Contains(got[0].Err.Error(), "larger than") || errors.Is(got[0].Err, ErrUnreadable) {
			t.Fatalf("%+v", got)
		}
		t.Logf("a 1 GiB array element: refused after reading %.1f MiB, peak heap %.1f MiB", float64(g.big)/(1<<20), float64(peak)/(1<<20))
		if peak > 64<<20 {
			t.Fatalf("peak heap %d bytes", peak)
		}
	})
}
