//go:build drills

package drills

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// Bounds of the ingest drill: uploads of OPA's decision-log plugin, each
// a gzip JSON array of events over ingestSessions sessions. An upload
// is larger than the server's ingest batch (ingest.DefaultBatch, 1,000
// records a transaction), so a kill can land between its transactions.
const (
	ingestUploads  = 6
	ingestPerBatch = 1500
	ingestSessions = 6
)

// opaUpload is upload i: ingestPerBatch OPA decision events.
func opaUpload(t *testing.T, i int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte("["))
	for j := range ingestPerBatch {
		n := i*ingestPerBatch + j
		if j > 0 {
			zw.Write([]byte(","))
		}
		fmt.Fprintf(zw, `{"decision_id":"drill-%06d","path":"authz/allow","input":{"session_id":"ingest-%d","n":%d},"result":true,"labels":{"id":"drill-opa"},"timestamp":"2026-12-01T10:00:00Z"}`,
			n, n%ingestSessions, n)
	}
	zw.Write([]byte("]"))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// uploadResult is what became of one upload.
type uploadResult struct {
	accepted, duplicate int
	err                 error // no answer: the upload was in flight
}

// upload posts one upload as OPA's plugin does, waiting out 429s.
func upload(s *Server, body []byte) uploadResult {
	for range 100 {
		req, err := http.NewRequest(http.MethodPost, s.URL+"/api/v1/ingest/opa/logs", bytes.NewReader(body))
		if err != nil {
			return uploadResult{err: err}
		}
		req.Header.Set("Content-Encoding", "gzip")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+AdminToken)
		resp, err := client.Do(req)
		if err != nil {
			return uploadResult{err: err}
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return uploadResult{err: err}
		}
		if resp.StatusCode == http.StatusTooManyRequests {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		var sum struct {
			Accepted    int `json:"accepted"`
			Duplicate   int `json:"duplicate"`
			Quarantined int `json:"quarantined"`
		}
		if err := json.Unmarshal(b, &sum); resp.StatusCode != http.StatusOK || err != nil || sum.Quarantined != 0 {
			return uploadResult{err: fmt.Errorf("upload answered %d: %s", resp.StatusCode, b)}
		}
		return uploadResult{accepted: sum.Accepted, duplicate: sum.Duplicate}
	}
	return uploadResult{err: fmt.Errorf("upload refused with 429 100 times")}
}

// TestKill9Ingest kills `acsledger serve` with SIGKILL in the middle of a
// bulk ingest through its OPA decision-log route, twice, on each store;
// after each restart the uploader sends everything again from the first
// upload, as OPA retries. Every upload answered before a kill comes back
// all duplicates, the upload the kill cut is reported with the records it
// had committed, and at the end every record is stored exactly once,
// chained, anchored, and the ledger re-verifies green.
func TestKill9Ingest(t *testing.T) {
	bodies := make([][]byte, ingestUploads)
	for i := range bodies {
		bodies[i] = opaUpload(t, i)
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			db := st.open(t)
			keys := Keygen(t, bin)
			acked := make([]bool, ingestUploads) // answered 200 in some run
			var cut []string                     // the uploads the kills cut, and what they had committed
			lastCut := -1
			var s *Server
			// The first two runs are killed while upload killAt is being
			// written, a third and then two thirds of the way in; the
			// last runs to the end.
			for run, killAt := range []int{2, 4, -1} {
				s = Serve(t, bin, "--db", db, "--keys", keys)
				for i, r := range ingestRun(t, s, bodies, killAt, float64(run+1)/3) {
					switch {
					case r.err != nil && killAt >= 0:
						cut = append(cut, fmt.Sprintf("upload %d", i))
						lastCut = i
					case r.err != nil:
						t.Fatalf("run %d, upload %d: %v\n%s", run+1, i, r.err, s.Log())
					case r.accepted+r.duplicate != ingestPerBatch:
						t.Fatalf("run %d, upload %d: %d accepted, %d duplicate of %d", run+1, i, r.accepted, r.duplicate, ingestPerBatch)
					case acked[i] && r.duplicate != ingestPerBatch:
						t.Fatalf("run %d, upload %d was acknowledged before, yet %d of its records were accepted again", run+1, i, r.accepted)
					default:
						if i == lastCut {
							// Resent after the kill that cut it: its
							// duplicates are what it had committed.
							cut[len(cut)-1] += fmt.Sprintf(" (%d committed)", r.duplicate)
							lastCut = -1
						}
						acked[i] = true
					}
				}
				if killAt >= 0 && lastCut < 0 {
					t.Fatalf("run %d: the kill cut no upload", run+1)
				}
			}

			entries, missing, dups := checkIngested(t, s)
			anchored, _ := s.WaitAnchored(t, entries)
			rv := s.Reverify(t)
			if !rv.Green() || rv.Entries != anchored {
				t.Errorf("re-verification after the ingest: %s; the log anchors %d entries", rv, anchored)
			}
			summary(t, "kill9-ingest-"+st.name, "2 kills; records %d, stored %d, missing %d, duplicates %d; cut %v; anchored %d of %d in the ledger; re-verification %s",
				ingestUploads*ingestPerBatch, entries, missing, dups, cut, anchored, rv.Entries, rv)
			s.Stop(t)
		})
	}
}

// ingestRun sends the uploads to s in order until one gets no answer and
// returns their results. With killAt >= 0 it kills s once upload killAt
// has been on its way for frac of the time the upload before it took.
func ingestRun(t *testing.T, s *Server, bodies [][]byte, killAt int, frac float64) []uploadResult {
	t.Helper()
	type start struct {
		i    int
		prev time.Duration // how long upload i-1 took
	}
	started := make(chan start, len(bodies))
	results := make(chan uploadResult, len(bodies))
	go func() {
		defer close(results)
		var prev time.Duration
		for i, body := range bodies {
			started <- start{i, prev}
			t0 := time.Now()
			r := upload(s, body)
			prev = time.Since(t0)
			results <- r
			if r.err != nil {
				return
			}
		}
	}()
	if killAt >= 0 {
		for st := range started {
			if st.i == killAt {
				time.Sleep(time.Duration(float64(st.prev) * frac))
				break
			}
		}
		s.Kill(t)
	}
	var out []uploadResult
	for r := range results {
		out = append(out, r)
	}
	return out
}

// checkIngested reads the drill's sessions back and counts the entries,
// the records with no entry and the records stored more than once,
// failing t on either of the last two.
func checkIngested(t *testing.T, s *Server) (entries int64, missing, dups int) {
	t.Helper()
	sessions := make([]string, ingestSessions)
	for i := range sessions {
		sessions[i] = fmt.Sprintf("ingest-%d", i)
	}
	chains := s.ReadChains(t, sessions)
	for _, c := range chains {
		entries += int64(c.Entries)
		for step, n := range c.Steps {
			if n != 1 {
				dups++
				t.Errorf("%s: %s stored %d times", c.Session, step, n)
			}
		}
	}
	for n := range ingestUploads * ingestPerBatch {
		if chains[fmt.Sprintf("ingest-%d", n%ingestSessions)].Steps[fmt.Sprintf("opa:drill-%06d", n)] != 1 {
			missing++
		}
	}
	if missing != 0 || entries != ingestUploads*ingestPerBatch {
		t.Errorf("%d entries stored, %d records missing, want %d entries", entries, missing, ingestUploads*ingestPerBatch)
	}
	return entries, missing, dups
}
