package exportsink_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/acsledger/acsledger/internal/exportsink"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/export"
	"github.com/acsledger/acsledger/ledger/export/exporttest"
	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
)

// lakeSteps are the step types of the lake ledger: one per OCSF class the
// mapping uses (docs/export.md), so the lake gets a partition per class.
var lakeSteps = []string{
	"steps/toolCallRequest",    // 1007
	"steps/sessionStart",       // 3002
	"steps/userMessage",        // 6002
	"steps/memoryStore",        // 6005
	"steps/skillLoad",          // 1005
	"agbom/snapshot",           // 5001
	"ingest/opa/decision",      // 6003
	"steps/toolCallResult",     // 1007
	"intent_extension",         // 3003
	"steps/knowledgeRetrieval", // 6005
}

// lakeClasses is how many classes the lake's events fall in: the 8 of
// lakeSteps and Detection Finding.
const lakeClasses = 9

// lakeDays are the days the lake ledger's entries fall on.
var lakeDays = []string{"2026-12-01", "2026-12-02", "2026-12-03"}

// lakeEntry is entry i of the lake ledger: step type i mod 10, on day
// (i/7) mod 3, denied when i mod 5 is 4 (an ACS step, so a Detection
// Finding too).
func lakeEntry(i int) (entry []byte, finding bool) {
	step := lakeSteps[i%len(lakeSteps)]
	day := lakeDays[(i/7)%len(lakeDays)]
	disp := "allow"
	if i%5 == 4 {
		disp = "deny"
	}
	finding = disp == "deny" && strings.HasPrefix(step, "steps/")
	dec := fmt.Sprintf(`{"disposition":%q,"reasoning":"lake entry %d"}`, disp, i)
	if !strings.HasPrefix(step, "steps/") {
		dec = fmt.Sprintf(`{"reasoning":"lake entry %d"}`, i)
	}
	return fmt.Appendf(nil, `{"entry_id":"00000000-0000-4000-8000-%012d","step_id":"step-%d","step_type":%q,`+
		`"timestamp":"%sT%02d:%02d:%02d.000Z","decision":%s}`,
		i, i, step, day, (i/3600)%24, (i/60)%60, i%60, dec), finding
}

// lakeLedger is a ledger of n lake entries with their entry hashes, and
// which of them are Detection Findings too.
func lakeLedger(t testing.TB, n int) (*exporttest.Ledger, []string, map[string]bool) {
	t.Helper()
	l := exporttest.New(t)
	ctx := context.Background()
	findings := map[string]bool{}
	var isFinding []bool
	for done := 0; done < n; {
		k := min(5000, n-done)
		rs := make([]ledger.Record, k)
		for j := range k {
			i := done + j
			e, f := lakeEntry(i)
			isFinding = append(isFinding, f)
			rs[j] = ledger.Record{SessionID: fmt.Sprintf("lake-%d", i/50), AgentID: "team-a/bot", Entry: e}
		}
		if _, err := l.AppendBatch(ctx, rs); err != nil {
			t.Fatal(err)
		}
		done += k
	}
	tlogtest.IntegrateAll(t, l.Log)
	var hashes []string
	for from := uint64(0); from < uint64(n); from += 10000 {
		es, err := l.ExportEntries(ctx, ledger.ExportFilter{From: from, To: min(uint64(n), from+10000), Limit: 10000})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			h := hex.EncodeToString(e.EntryHash[:])
			if isFinding[len(hashes)] {
				findings[h] = true
			}
			hashes = append(hashes, h)
		}
	}
	if len(hashes) != n {
		t.Fatalf("%d leaves for %d entries", len(hashes), n)
	}
	return l, hashes, findings
}

// runParquet delivers l to the Parquet sink at url until every leaf was
// acknowledged, with the batch size the sink asks for.
func runParquet(t *testing.T, l *exporttest.Ledger, name, url string) {
	t.Helper()
	c, err := exportsink.Parse(name, url, "ocsf")
	if err != nil {
		t.Fatal(err)
	}
	sink, err := exportsink.Open(c)
	if err != nil {
		t.Fatal(err)
	}
	batch := sink.(interface{ BatchSize() int }).BatchSize()
	d := &export.Deliverer{Name: name, Store: l, Sink: sink, Encoder: export.Encoder{Format: c.Format, Origin: "test.example/log"},
		Batch: batch, Poll: 10 * time.Millisecond, Timeout: time.Minute, MaxBackoff: 100 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	size, err := l.LogSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for d.Status().NextLeaf < size {
		if time.Now().After(deadline) {
			t.Fatalf("delivered %d of %d leaves; last error %q", d.Status().NextLeaf, size, d.Status().LastError)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lakeRow is what the independent reader (Apache Arrow's Go Parquet
// implementation, not the writer's library) finds in one row.
type lakeRow struct {
	classUID  int32
	time      int64
	entryHash string
	leaf      int64
	event     string
}

// readLakeFile reads the rows of one Parquet file with Arrow's reader.
func readLakeFile(t *testing.T, name string, data []byte) []lakeRow {
	t.Helper()
	r, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: not a Parquet file: %v", name, err)
	}
	defer r.Close()
	sc := r.MetaData().Schema
	col := func(path string) int {
		i := sc.ColumnIndexByName(path)
		if i < 0 {
			t.Fatalf("%s: no column %s", name, path)
		}
		return i
	}
	ci, ti, hi, li, ei := col("class_uid"), col("time"), col("acsledger.entry_hash"), col("acsledger.leaf_index"), col("event")
	var rows []lakeRow
	for g := range r.NumRowGroups() {
		rg := r.RowGroup(g)
		n := rg.NumRows()
		base := len(rows)
		rows = append(rows, make([]lakeRow, n)...)
		out := rows[base:]
		int32s := readColumn[int32](t, name, rg, ci, n)
		int64s := readColumn[int64](t, name, rg, ti, n)
		leaves := readColumn[int64](t, name, rg, li, n)
		hashes := readColumn[parquet.ByteArray](t, name, rg, hi, n)
		events := readColumn[parquet.ByteArray](t, name, rg, ei, n)
		for k := range out {
			out[k] = lakeRow{classUID: int32s[k], time: int64s[k], entryHash: string(hashes[k]), leaf: leaves[k], event: string(events[k])}
		}
	}
	return rows
}

// readColumn reads n values of a required column.
func readColumn[V int32 | int64 | parquet.ByteArray](t *testing.T, name string, rg *file.RowGroupReader, i int, n int64) []V {
	t.Helper()
	cr, err := rg.Column(i)
	if err != nil {
		t.Fatalf("%s: column %d: %v", name, i, err)
	}
	vals := make([]V, n)
	var got int
	for got < int(n) {
		var k int
		switch c := cr.(type) {
		case *file.Int32ColumnChunkReader:
			_, k, err = c.ReadBatch(n-int64(got), any(vals[got:]).([]int32), nil, nil)
		case *file.Int64ColumnChunkReader:
			_, k, err = c.ReadBatch(n-int64(got), any(vals[got:]).([]int64), nil, nil)
		case *file.ByteArrayColumnChunkReader:
			_, k, err = c.ReadBatch(n-int64(got), any(vals[got:]).([]parquet.ByteArray), nil, nil)
		default:
			t.Fatalf("%s: column %d is a %T", name, i, cr)
		}
		if err != nil {
			t.Fatalf("%s: column %d: %v", name, i, err)
		}
		if k == 0 {
			t.Fatalf("%s: column %d: %d of %d values", name, i, got, n)
		}
		got += k
	}
	return vals
}

// checkLake reads every file of a lake (key: its path under the sink's
// root, '/'-separated) and checks that each file sits in the partition of
// its rows' class and day, that every entry's step event is there once,
// and every deny's Detection Finding once.
func checkLake(t *testing.T, files map[string][]byte, hashes []string, findings map[string]bool) {
	t.Helper()
	steps, finds := map[string]int{}, map[string]int{}
	partitions := map[string]bool{}
	for key, data := range files {
		parts := strings.Split(key, "/")
		if len(parts) != 3 || !strings.HasPrefix(parts[0], "class_uid=") || !strings.HasPrefix(parts[1], "event_day=") || !strings.HasSuffix(parts[2], ".parquet") {
			t.Fatalf("%s: not CLASS/DAY/FILE.parquet", key)
		}
		class, err := strconv.Atoi(strings.TrimPrefix(parts[0], "class_uid="))
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		day := strings.TrimPrefix(parts[1], "event_day=")
		partitions[parts[0]+"/"+parts[1]] = true
		rows := readLakeFile(t, key, data)
		if len(rows) == 0 {
			t.Fatalf("%s: no rows", key)
		}
		for i, r := range rows {
			if i > 0 && r.time < rows[i-1].time {
				t.Fatalf("%s: row %d is older than row %d", key, i, i-1)
			}
			if int(r.classUID) != class {
				t.Fatalf("%s: a row of class %d", key, r.classUID)
			}
			if d := time.UnixMilli(r.time).UTC().Format("20060102"); d != day {
				t.Fatalf("%s: a row of day %s", key, d)
			}
			var ev struct {
				ClassUID int32 `json:"class_uid"`
				Unmapped struct {
					Acsledger struct {
						EntryHash string `json:"entry_hash"`
						LeafIndex int64  `json:"leaf_index"`
					} `json:"acsledger"`
				} `json:"unmapped"`
			}
			if err := json.Unmarshal([]byte(r.event), &ev); err != nil {
				t.Fatalf("%s: event column: %v", key, err)
			}
			if ev.ClassUID != r.classUID || ev.Unmapped.Acsledger.EntryHash != r.entryHash || ev.Unmapped.Acsledger.LeafIndex != r.leaf {
				t.Fatalf("%s: the columns (%d %s %d) disagree with the event (%d %s %d)", key,
					r.classUID, r.entryHash, r.leaf, ev.ClassUID, ev.Unmapped.Acsledger.EntryHash, ev.Unmapped.Acsledger.LeafIndex)
			}
			if r.classUID == 2004 {
				finds[r.entryHash]++
			} else {
				steps[r.entryHash]++
			}
		}
	}
	nFindings := 0
	for i, h := range hashes {
		if steps[h] != 1 {
			t.Errorf("entry %d (%s): its step event is in the lake %d times, want once", i, h, steps[h])
		}
		want := 0
		if findings[h] {
			want = 1
			nFindings++
		}
		if finds[h] != want {
			t.Errorf("entry %d (%s): %d Detection Findings, want %d", i, h, finds[h], want)
		}
	}
	if len(steps) != len(hashes) || len(finds) != nFindings {
		t.Errorf("the lake holds %d step events and %d findings of other entries", len(steps)-len(hashes), len(finds)-nFindings)
	}
	// 8 classes of steps and the findings' 2004, on three days each.
	if len(partitions) != lakeClasses*len(lakeDays) {
		t.Errorf("%d partitions, want %d: %v", len(partitions), lakeClasses*len(lakeDays), partitions)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// TestParquetDirectory delivers 20,000 entries to a directory lake and
// reads every file back with the independent reader.
func TestParquetDirectory(t *testing.T) {
	t.Parallel()
	n := 20000
	if testing.Short() || raceDetector {
		n = 2000
	}
	l, hashes, findings := lakeLedger(t, n)
	root := t.TempDir()
	runParquet(t, l, "lake", "parquet://"+root+"?batch=7000")
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if strings.HasPrefix(rel, ".tmp/") {
			t.Errorf("a temporary file is left: %s", rel)
			return nil
		}
		data, err := os.ReadFile(p)
		files[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	checkLake(t, files, hashes, findings)
	// Three batches of 7,000, 7,000 and 6,000 entries: at most one file
	// per partition each.
	if len(files) > 3*lakeClasses*len(lakeDays) {
		t.Errorf("%d files for 3 batches over %d partitions", len(files), lakeClasses*len(lakeDays))
	}
}

// TestParquetParse: a Parquet sink's bad values stop serve naming the
// parameter, and no message holds the secret key.
func TestParquetParse(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	dir := t.TempDir()
	const secret = "s3cr3t-KEY"
	for _, tc := range []struct {
		url, format, want string
	}{
		{"parquet://relative/dir", "", "want parquet:///ABSOLUTE/DIR"},
		{"parquet://" + dir + "?batch=0", "", `batch="0"`},
		{"parquet://" + dir + "?batch=10001", "", `batch="10001"`},
		{"parquet://" + dir + "?interval=soon", "", `interval="soon"`},
		{"parquet://" + dir + "?layout=delta", "", `layout="delta"`},
		{"parquet://" + dir + "?layout=security-lake&region=eu-west-1", "", "needs region and account_id"},
		{"parquet://" + dir + "?account_id=1", "", "go with layout=security-lake"},
		{"parquet://" + dir, "cloudevents", "writes OCSF only"},
		{"parquet+s3://AK:" + secret + "@s3.example", "", "no bucket"},
		{"parquet+s3://AK:" + secret + "@s3.example:99999/lake", "", "port"},
		{"parquet+s3+http://AK:" + secret + "@127.0.0.1:9000/lake?ca=/x.pem", "", "need parquet+s3 (HTTPS)"},
		{"parquet+s3://AK:" + secret + "@s3.example/lake?ca=/nonexistent.pem", "", "ca=/nonexistent.pem"},
		{"parquet+s3://s3.example/lake", "", "no credentials"},
		{"parquet+s3://AK:" + secret + "@s3.example/lake?batchsize=5", "", "batchsize"},
		{"parquet+s3+http://AK:" + secret + "@s3.example:9000/lake", "", "only to a loopback address"},
	} {
		_, err := exportsink.Parse("lake", tc.url, tc.format)
		if err == nil {
			t.Errorf("%s: accepted", tc.url)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to say %q", tc.url, err, tc.want)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the message holds the secret key: %v", tc.url, err)
		}
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "AK")
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	for _, u := range []string{
		"parquet+s3://s3.example/lake/acs?layout=security-lake&region=eu-west-1&account_id=123456789012",
		"parquet+s3+http://127.0.0.1:9000/lake",
		"parquet://" + dir + "?batch=500&interval=5m",
	} {
		c, err := exportsink.Parse("lake", u, "ocsf@1.5")
		if err != nil {
			t.Errorf("%s: %v", u, err)
			continue
		}
		if strings.Contains(c.Redacted, secret) {
			t.Errorf("%s: redacted as %s", u, c.Redacted)
		}
	}
}
