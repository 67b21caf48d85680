package export_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/export/exporttest"
	"github.com/acsledger/acsledger/web/export"
)

// BenchmarkPull reads a whole ledger (embedded store, every fifth entry a
// deny with its Detection Finding) through GET /events as OCSF, 10,000
// lines a page over loopback HTTP, resuming after each page's last
// cursor, beside the same-run baseline: a handler on the same server that
// writes the same pages' entries raw as NDJSON.
//
//	go test ./web/export -run '^$' -bench BenchmarkPull -benchtime 3x
func BenchmarkPull(b *testing.B) {
	n := 20000
	if v := os.Getenv("ACSLEDGER_BENCH_EXPORT_ENTRIES"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	l := exporttest.New(b)
	for done := 0; done < n; done += 5000 {
		l.Append(b, min(5000, n-done))
	}
	r := chi.NewRouter()
	export.New(export.Options{Store: l}, slog.New(slog.DiscardHandler)).Mount(r)
	r.Get("/raw", func(w http.ResponseWriter, req *http.Request) {
		from, _ := strconv.ParseUint(req.URL.Query().Get("from"), 10, 64)
		es, err := l.ExportEntries(req.Context(), ledger.ExportFilter{From: from, To: from + 10000, Limit: 10000})
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		bw := bufio.NewWriterSize(w, 64<<10)
		for _, e := range es {
			bw.Write(e.Content)
			bw.WriteByte('\n')
		}
		bw.Flush()
	})
	srv := httptest.NewServer(r)
	defer srv.Close()
	client := srv.Client()
	get := func(url string) (lines int, last []byte) {
		resp, err := client.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines++
			last = append(last[:0], sc.Bytes()...)
		}
		return lines, last
	}
	var ours, raw time.Duration
	events := 0
	for range b.N {
		start := time.Now()
		after, got := "", 0
		for {
			lines, last := get(srv.URL + "/events?limit=10000&after=" + after)
			got += lines
			if lines < 10000 {
				break
			}
			var l struct{ Cursor string }
			if err := json.NewDecoder(bytes.NewReader(last)).Decode(&l); err != nil {
				b.Fatal(err)
			}
			after = l.Cursor
		}
		ours += time.Since(start)
		events = got

		start = time.Now()
		rawLines := 0
		for from := 0; from < n; from += 10000 {
			lines, _ := get(fmt.Sprintf("%s/raw?from=%d", srv.URL, from))
			rawLines += lines
		}
		raw += time.Since(start)
		if rawLines != n {
			b.Fatalf("raw: %d lines for %d entries", rawLines, n)
		}
	}
	if events < n {
		b.Fatalf("pulled %d events for %d entries", events, n)
	}
	b.ReportMetric(float64(b.N*n)/ours.Seconds(), "entries/s")
	b.ReportMetric(float64(b.N*events)/ours.Seconds(), "events/s")
	b.ReportMetric(float64(b.N*n)/raw.Seconds(), "raw-entries/s")
	b.ReportMetric(raw.Seconds()/ours.Seconds(), "ratio-to-raw")
}
