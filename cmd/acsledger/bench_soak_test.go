package main

import (
	"bytes"
	"encoding/csv"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/bench"
	"github.com/acsledger/acsledger/internal/pgtest"
)

// TestBenchSoak runs a short soak on each store, probe included, and checks
// the summary against the CSV it wrote, and that the CSV and SVG are
// well-formed and hold every sample.
func TestBenchSoak(t *testing.T) {
	for _, tc := range []struct {
		name string
		db   func(t *testing.T) string
	}{
		{"embedded", func(t *testing.T) string { return t.TempDir() }},
		{"postgres", func(t *testing.T) string { return pgtest.NewDatabase(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			args := []string{"bench", "soak", "--db", tc.db(t), "--duration", "8s", "--interval", "1s",
				"--probe", "2s", "--sessions", "4", "--session-length", "50", "--out", out}
			var stdout, stderr bytes.Buffer
			t0 := time.Now()
			if code := run(t.Context(), args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
			}
			if el := time.Since(t0); el > 90*time.Second {
				t.Errorf("an 8s soak with a 2s probe took %v", el)
			}
			text := stdout.String()
			t.Log(text)

			probe := regexp.MustCompile(`(?m)^  (\d+) decisions in \S+: (\d+) decisions/s$`).FindStringSubmatch(text)
			if probe == nil {
				t.Fatalf("no probe result in:\n%s", text)
			}
			maxRate, _ := strconv.Atoi(probe[2])
			sum := regexp.MustCompile(`(?m)^summary: (\d+) decisions in \S+: \d+ decisions/s \(target (\d+), half the measured (\d+)\); errors (\d+); shed (\d+); Merkle tree size (\d+)$`).FindStringSubmatch(text)
			if sum == nil {
				t.Fatalf("no summary line in:\n%s", text)
			}
			decisions, _ := strconv.Atoi(sum[1])
			target, _ := strconv.Atoi(sum[2])
			measured, _ := strconv.Atoi(sum[3])
			if measured != maxRate || (target != maxRate/2 && target != (maxRate+1)/2) {
				t.Errorf("target %d from measured %d, probe said %d: want half the probe's rate", target, measured, maxRate)
			}
			if sum[4] != "0" {
				t.Errorf("errors %s, want 0", sum[4])
			}
			if !regexp.MustCompile(`(?m)^verdict: (flat|not flat: .+)$`).MatchString(text) {
				t.Errorf("no verdict line in:\n%s", text)
			}
			for _, row := range []string{"RSS MiB", "live heap MiB", "goroutines", "db connections", "open descriptors", "p50 ms", "p99 ms"} {
				if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(row) + ` +[\d.]+ +[\d.]+$`).MatchString(text) {
					t.Errorf("summary has no %q row with two figures", row)
				}
			}

			rows := readSoakCSV(t, filepath.Join(out, "soak.csv"))
			if len(rows) < 7 || len(rows) > 9 {
				t.Fatalf("%d samples for 8s at 1s, want 8 (give or take one)", len(rows))
			}
			total, prevT := 0, 0.0
			for i, r := range rows {
				ts, _ := strconv.ParseFloat(r["t_s"], 64)
				if ts <= prevT {
					t.Errorf("sample %d at %vs does not follow %vs", i, ts, prevT)
				}
				prevT = ts
				n, _ := strconv.Atoi(r["decisions"])
				total += n
				for _, col := range []string{"rss_mib", "heap_live_mib", "goroutines", "db_conns", "open_fds"} {
					if v, _ := strconv.ParseFloat(r[col], 64); v <= 0 {
						t.Errorf("sample %d: %s = %q, want a positive figure", i, col, r[col])
					}
				}
			}
			if total != decisions {
				t.Errorf("the CSV's decisions add up to %d, the summary says %d", total, decisions)
			}
			// 8s at half the probe's rate; the shared box may not keep the pace.
			if want := float64(target) * 8; float64(total) < 0.6*want || float64(total) > 1.1*want {
				t.Errorf("%d decisions in 8s at %d/s", total, target)
			}
			if tree, _ := strconv.Atoi(sum[6]); tree == 0 {
				t.Error("the Merkle log integrated nothing")
			}
			// The first window is the second fifth of the samples: its
			// goroutine figure is the lowest of those samples'.
			fifth := max(len(rows)/5, 1)
			var gor []int
			for _, r := range rows[fifth:min(2*fifth, len(rows))] {
				n, _ := strconv.Atoi(r["goroutines"])
				gor = append(gor, n)
			}
			if !regexp.MustCompile(`(?m)^  goroutines +` + strconv.Itoa(slices.Min(gor)) + ` `).MatchString(text) {
				t.Errorf("first window's goroutines are not the least of samples %d..%d (%v)", fifth, 2*fifth-1, gor)
			}

			checkSoakSVG(t, filepath.Join(out, "soak.svg"), len(rows))
		})
	}
}

func readSoakCSV(t *testing.T, path string) []map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !slices.Equal(recs[0], bench.SoakCSVHeader) {
		t.Fatalf("header %v, want %v", recs[0], bench.SoakCSVHeader)
	}
	var rows []map[string]string
	for _, rec := range recs[1:] {
		m := map[string]string{}
		for i, h := range recs[0] {
			m[h] = rec[i]
		}
		rows = append(rows, m)
	}
	return rows
}

// checkSoakSVG parses the plot as XML: an svg root and nine series, each
// with one point per sample.
func checkSoakSVG(t *testing.T, path string, samples int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(b))
	var root string
	lines := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", path, err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if root == "" {
			root = se.Name.Local
			if se.Name.Space != "http://www.w3.org/2000/svg" {
				t.Errorf("root namespace %q", se.Name.Space)
			}
		}
		if se.Name.Local != "polyline" {
			continue
		}
		lines++
		for _, a := range se.Attr {
			if a.Name.Local == "points" {
				if n := len(strings.Fields(a.Value)); n != samples {
					t.Errorf("a series has %d points, want %d", n, samples)
				}
			}
		}
	}
	if root != "svg" || lines != 9 {
		t.Errorf("root <%s> with %d polylines, want <svg> with 9", root, lines)
	}
}
