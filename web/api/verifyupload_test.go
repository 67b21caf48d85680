package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/web"
	"github.com/acsledger/acsledger/web/api"
	"github.com/acsledger/acsledger/web/internal/webtest"
)

// uploadSize is the size of the uploads of TestVerifyUploadMemoryFlat.
const uploadSize = 50 << 20

// generated streams a bundle of about uploadSize bytes: head, then
// elements written by elem until the size is reached, then tail. Neither
// the client nor the test holds it. Closing the reader stops the writer,
// and t's end waits for it, so that no upload outlives its subtest.
func generated(t *testing.T, head, tail string, elem func(w io.Writer, i int) int) io.Reader {
	pr, pw := io.Pipe()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		bw := bufio.NewWriterSize(pw, 64<<10)
		n, err := bw.WriteString(head)
		for i := 0; err == nil && n < uploadSize; i++ {
			n += elem(bw, i)
			_, err = bw.Write(nil)
		}
		bw.WriteString(tail)
		pw.CloseWithError(bw.Flush())
	}()
	t.Cleanup(func() {
		pr.Close()
		<-stopped
	})
	return pr
}

// heapPeak runs f and returns how far the heap it retains rose above its
// level before: every 10 ms it collects garbage and reads the heap that
// collection found live, so that what it measures is what f holds, not
// what the collector has yet to free (the collector's pacing, and how busy
// the machine is, decide that).
func heapPeak(f func()) uint64 {
	read := func() uint64 {
		runtime.GC()
		live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(live)
		return live[0].Value.Uint64()
	}
	base := read()
	var peak atomic.Uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if h := read(); h > base && h-base > peak.Load() {
					peak.Store(h - base)
				}
			}
		}
	}()
	f()
	close(done)
	<-stopped
	return peak.Load()
}

// TestVerifyUploadMemoryFlat uploads 50 MB bundles shaped to make a
// verifier hold what it reads (one huge value; responses waiting for
// entries that never come) through a real loopback server: the server's
// heap stays well below the upload (it grew by 3.5 to 4 times the upload
// before uploads were verified within limits), the answer names the limit,
// and a bundle of 50 MB of steps is verified with its findings capped.
func TestVerifyUploadMemoryFlat(t *testing.T) {
	// The heap measured is the process's, so the test runs alone in a
	// child process: no other test's goroutines allocate beside it.
	if os.Getenv(aloneEnv) != "1" {
		runAlone(t)
		return
	}
	f := evidencetest.New(t, "sqlite")
	base := evidenceServer(t, f, func(o *web.EvidenceOptions) { o.MaxBundleBytes = 64 << 20 })
	const head = `{"format":"acsledger-evidence-bundle","version":1,"session_id":"s"`
	chunk := bytes.Repeat([]byte("a"), 4096)
	for _, c := range []struct {
		name string
		body func(t *testing.T) io.Reader
		msg  string
	}{
		{"one huge value", func(t *testing.T) io.Reader {
			return generated(t, head+`,"keys":{"log_keys":["`, `"]}}`, func(w io.Writer, _ int) int {
				n, _ := w.Write(chunk)
				return n
			})
		}, "value longer than"},
		{"responses without entries", func(t *testing.T) io.Reader {
			return generated(t, head+`,"responses":[`, `],"entries":[]}`, func(w io.Writer, i int) int {
				sep := ","
				if i == 0 {
					sep = ""
				}
				n, _ := fmt.Fprintf(w, `%s{"jsonrpc":"2.0","id":%d,"result":{"type":"final","request_id":"r%d","decision":"allow","chain_hash":"%064d"}}`, sep, i, i, i)
				return n
			})
		}, "responses wait for their entries"},
		{"steps", func(t *testing.T) io.Reader {
			// Entries that state no hashes: each is an
			// entry_hash_mismatch, and only the first findings are kept.
			return generated(t, head+`,"steps":[`, `]}`, func(w io.Writer, i int) int {
				sep := ","
				if i == 0 {
					sep = ""
				}
				n, _ := fmt.Fprintf(w, `%s{"entry":{"entry_id":"e-%d","step_id":"s-%d","step_type":"steps/toolCallRequest","timestamp":"2026-03-14T14:02:03.000Z","decision":"allow"}}`, sep, i, i)
				return n
			})
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var code int
			var answer []byte
			upload := func() uint64 {
				return heapPeak(func() {
					resp, err := postBundle(base+"/verify/bundle", c.body(t))
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					code = resp.StatusCode
					answer, _ = io.ReadAll(resp.Body)
				})
			}
			peak := upload()
			t.Logf("%d MB upload: heap peak %.1f MB above the level before", uploadSize>>20, float64(peak)/(1<<20))
			// The runtime's own background work can still allocate
			// beside the upload; a verifier that holds what it reads
			// does so on every upload, so a second upload decides, and
			// the lower peak counts.
			if peak > uploadSize/5 {
				again := upload()
				t.Logf("again: heap peak %.1f MB", float64(again)/(1<<20))
				peak = min(peak, again)
			}
			if c.msg == "" {
				var rep evidence.Report
				if err := json.Unmarshal(answer, &rep); code != 200 || err != nil || rep.Verified || len(rep.Findings) != 1000 || rep.FindingsDropped == 0 {
					t.Errorf("answer %d, %d findings kept, %d dropped (%v); want 200 with 1000 kept and the rest counted", code, len(rep.Findings), rep.FindingsDropped, err)
				}
			} else if code != 400 || !strings.Contains(string(answer), c.msg) {
				t.Errorf("answer %d %s, want 400 naming %q", code, answer, c.msg)
			}
			if peak > uploadSize/5 {
				t.Errorf("verifying a %d MB upload, the heap grew by %d MB; want under a fifth of the upload", uploadSize>>20, peak>>20)
			}
		})
	}
}

// TestVerifyUploadBusy holds the only verification slot with an upload
// that is still arriving: the next upload is answered 503 with
// Retry-After at once, while its own body is still open (the server does
// not wait to read it), and once the first ends, uploads are verified
// again.
func TestVerifyUploadBusy(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	base := evidenceServer(t, f, func(o *web.EvidenceOptions) { o.MaxConcurrentVerifications = 1 })
	send := func(body io.Reader) (*http.Response, error) { return postBundle(base+"/verify/bundle", body) }
	body, first := webtest.SlowUpload(t, send)
	// The server reads the first bytes only once it holds the slot. The
	// write returns once they are read; it is larger than what loopback
	// socket buffers hold (a few MB), so that it cannot return before the
	// server started reading: 128 KiB once did, under load, and the second
	// upload took the slot first.
	if _, err := io.WriteString(body, `{"format":"acsledger-evidence-bundle",`+strings.Repeat(" ", 16<<20)); err != nil {
		t.Fatal(err)
	}
	_, refused := webtest.SlowUpload(t, send)
	got := webtest.Answer(t, refused, "the upload refused while its body was still open (the server waited to read it)")
	if got.Code != http.StatusServiceUnavailable || got.Header.Get("Retry-After") != api.RetryAfterSeconds || !strings.Contains(webtest.ErrorText(t, []byte(got.Body)), "retry later") {
		t.Errorf("while busy: %d Retry-After %q %s; want 503 with Retry-After %s", got.Code, got.Header.Get("Retry-After"), got.Body, api.RetryAfterSeconds)
	}
	body.Close()
	if got := webtest.Answer(t, first, "the first upload"); got.Code != 400 {
		t.Errorf("the first upload, cut short: %d %s, want 400", got.Code, got.Body)
	}
	if code, _, b := webtest.Do(t, "POST", base+"/verify/bundle", []byte(`{}`)); code != 400 {
		t.Errorf("after the first ended: %d %s, want 400 (a bundle with no members)", code, b)
	}
}

// postBundle uploads a bundle as the tests' admin.
func postBundle(url string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+webtest.AdminToken)
	return http.DefaultClient.Do(req)
}

// aloneEnv marks the child process runAlone starts.
const aloneEnv = "ACSLEDGER_TEST_ALONE"

// runAlone runs the calling test again in a child process of the test
// binary, by itself, and fails with the child's output if it fails.
func runAlone(t *testing.T) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), aloneEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("%s alone in a child process: %v\n%s", t.Name(), err, out)
	}
	t.Logf("alone in a child process:\n%s", out)
}
