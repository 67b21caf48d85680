package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// eventLine is a line of GET /api/v1/events.
type eventLine struct {
	Cursor    string          `json:"cursor"`
	Event     json.RawMessage `json:"event"`
	Heartbeat string          `json:"heartbeat"`
}

// entryHashOf is the entry hash an OCSF or CloudEvents event carries.
func entryHashOf(t *testing.T, ev []byte) string {
	t.Helper()
	var e struct {
		ID       string `json:"id"`
		Unmapped struct {
			Acsledger struct {
				EntryHash string `json:"entry_hash"`
			} `json:"acsledger"`
		} `json:"unmapped"`
	}
	if err := json.Unmarshal(ev, &e); err != nil {
		t.Fatalf("not an event: %.200s: %v", ev, err)
	}
	if e.ID != "" {
		return e.ID
	}
	return e.Unmapped.Acsledger.EntryHash
}

// pullAll reads GET /api/v1/events page by page from the start, with
// token, and returns the entry hashes of its events.
func pullAll(t *testing.T, url, token string, limit int) (hashes []string, cursors []string) {
	t.Helper()
	after := ""
	for range 1000 {
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/api/v1/events?limit=%d&after=%s", url, limit, after), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("GET events: %d %s", resp.StatusCode, b)
		}
		n := 0
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var l eventLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			if l.Cursor != "" {
				after = l.Cursor
			}
			if l.Event != nil {
				hashes = append(hashes, entryHashOf(t, l.Event))
				cursors = append(cursors, l.Cursor)
				n++
			}
		}
		resp.Body.Close()
		if n < limit {
			return hashes, cursors
		}
	}
	t.Fatal("no end of the events")
	return nil, nil
}

// collector is the test's HTTP receiver of the http sink.
type collector struct {
	mu     sync.Mutex
	hashes []string
	delay  time.Duration
	srv    *httptest.Server
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		c.mu.Lock()
		delay := c.delay
		c.mu.Unlock()
		time.Sleep(delay)
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
			c.hashes = append(c.hashes, entryHashOf(t, []byte(line)))
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *collector) seen() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]int{}
	for _, h := range c.hashes {
		m[h]++
	}
	return m
}

// fileHashes reads the file sink's NDJSON files in dir.
func fileHashes(t *testing.T, dir string) map[string]int {
	names, _ := filepath.Glob(filepath.Join(dir, "*.ndjson"))
	m := map[string]int{}
	for _, n := range names {
		b, _ := os.ReadFile(n)
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if line != "" {
				m[entryHashOf(t, []byte(line))]++
			}
		}
	}
	return m
}

func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func hasAll(seen map[string]int, want []string) bool {
	for _, h := range want {
		if seen[h] == 0 {
			return false
		}
	}
	return true
}

// The pull API and the push sinks through the real binary: every entry
// arrives, by hash, through the pull API (resumed line by line), an HTTP
// collector and a file sink; a kill -9 during delivery leaves no gap.
func TestEventsEndToEnd(t *testing.T) {
	dir := t.TempDir()
	lake := filepath.Join(dir, "lake")
	col := newCollector(t)
	args := []string{"--db", filepath.Join(dir, "db"),
		"--export", "siem=" + col.srv.URL + "/ingest", "--export-format", "siem=cloudevents",
		"--export", "lake=file://" + lake}
	s := startServer(t, args...)
	var want []string
	appendN := func(s *server, from, n int) {
		for i := from; i < from+n; i++ {
			agent := "team-a/bot"
			if i%2 == 1 {
				agent = "team-b/bot"
			}
			code, out := post(t, fmt.Sprintf("%s/api/v1/sessions/sess-%d/entries?agent_id=%s", s.url, i%2, agent), entryJSON(i))
			if code != http.StatusCreated {
				t.Fatalf("append %d: %d %v", i, code, out)
			}
			want = append(want, out["entry_hash"].(string))
		}
	}
	defer func() {
		if t.Failed() {
			t.Logf("server log:\n%s", s.log())
		}
	}()
	appendN(s, 0, 20)

	// Pull, five lines at a time: each entry once, in the log's order.
	var got []string
	waitUntil(t, "20 entries in the pull API", 20*time.Second, func() bool {
		got, _ = pullAll(t, s.url, testAdminToken, 5)
		return len(got) >= 20
	})
	// The pull API's reads are themselves recorded in the ledger (the
	// access log), so its entries are among the events too.
	ours := filterIn(got, want)
	if len(ours) != 20 || !hasAll(countOf(ours), want) {
		t.Fatalf("pulled %d of our events (of %d), want the 20 entries once each", len(ours), len(got))
	}
	for i := range ours {
		if ours[i] != want[i] {
			t.Fatalf("event %d is entry %s, want %s: not in commit order", i, ours[i], want[i])
		}
	}
	// A scoped auditor sees its agents' entries only.
	code, tok := post(t, s.url+"/api/v1/admin/tokens", `{"role":"auditor","scope":"team-b/"}`)
	if code != http.StatusCreated {
		t.Fatalf("token: %d %v", code, tok)
	}
	scoped, _ := pullAll(t, s.url, tok["token"].(string), 3)
	if len(scoped) != 10 { // the access log is not in team-b/
		t.Errorf("scope team-b/ pulled %d events, want 10", len(scoped))
	}
	for i, h := range scoped {
		if h != want[2*i+1] {
			t.Errorf("scoped event %d is %s, want team-b's %s", i, h, want[2*i+1])
		}
	}
	for _, tc := range []struct{ query, want string }{
		{"after=x", "after"}, {"after=-1", "after"}, {"format=xml", "format"}, {"limit=10001", "limit"},
	} {
		code, body := get(t, s.url+"/api/v1/events?"+tc.query)
		if code != http.StatusBadRequest || !strings.Contains(string(body), tc.want) {
			t.Errorf("GET events?%s: %d %s", tc.query, code, body)
		}
	}

	// follow=1 sends an entry appended after the stream opened.
	req, _ := http.NewRequest("GET", s.url+"/api/v1/events?follow=1&after="+func() string { _, c := pullAll(t, s.url, testAdminToken, 100); return c[len(c)-1] }(), nil)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	lines := make(chan eventLine)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var l eventLine
			json.Unmarshal(sc.Bytes(), &l)
			lines <- l
		}
	}()
	appendN(s, 20, 1)
	// Lines of the access log (this very request's record among them)
	// may come first.
	timeout := time.After(20 * time.Second)
follow:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("follow: the stream ended")
			}
			if l.Event != nil && entryHashOf(t, l.Event) == want[20] {
				break follow
			}
		case <-timeout:
			t.Fatal("follow: the new entry did not arrive")
		}
	}
	resp.Body.Close()

	waitUntil(t, "the sinks to take 21 entries", 30*time.Second, func() bool {
		return hasAll(col.seen(), want) && hasAll(fileHashes(t, lake), want)
	})
	code, body := get(t, s.url+"/api/v1/exports")
	var list struct {
		Sinks []struct {
			Name          string `json:"name"`
			Acknowledged  int64  `json:"acknowledged"`
			EntriesBehind uint64 `json:"entries_behind"`
			Configured    bool   `json:"configured"`
		} `json:"sinks"`
	}
	if err := json.Unmarshal(body, &list); code != 200 || err != nil || len(list.Sinks) != 2 {
		t.Fatalf("GET exports: %d %s", code, body)
	}
	for _, sk := range list.Sinks {
		// The access log's entries of the reads above are delivered too.
		if sk.Acknowledged < 21 || !sk.Configured {
			t.Errorf("sink %+v", sk)
		}
	}
	code, metrics := get(t, s.url+"/metrics")
	if code != 200 || !strings.Contains(string(metrics), `acsledger_export_acknowledged_total{acsledger_sink="siem"`) {
		t.Errorf("/metrics has no export figures:\n%.2000s", metrics)
	}

	// kill -9 while the collector is slow and 40 entries are in flight;
	// the restarted server delivers everything.
	col.mu.Lock()
	col.delay = 300 * time.Millisecond
	col.mu.Unlock()
	appendN(s, 21, 40)
	time.Sleep(700 * time.Millisecond)
	s.p.Kill(t)
	col.mu.Lock()
	col.delay = 0
	col.mu.Unlock()
	s = startServer(t, args...)
	waitUntil(t, "the sinks to take 61 entries after kill -9", 30*time.Second, func() bool {
		return hasAll(col.seen(), want) && hasAll(fileHashes(t, lake), want)
	})
	dups := 0
	for _, n := range col.seen() {
		dups += n - 1
	}
	t.Logf("after kill -9: %d entries, %d duplicates at the collector", len(want), dups)
	s.stop(t, syscall.SIGTERM)
}

// filterIn keeps the hashes of hs that are in want, in order.
func filterIn(hs, want []string) []string {
	in := countOf(want)
	var out []string
	for _, h := range hs {
		if in[h] > 0 {
			out = append(out, h)
		}
	}
	return out
}

func countOf(hs []string) map[string]int {
	m := map[string]int{}
	for _, h := range hs {
		m[h]++
	}
	return m
}

// A bad --export stops serve before it starts, naming the flag and never
// showing a password.
func TestServeRefusesBadExport(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ args []string }{
		{[]string{"--export", "siem=ftp://u:hunter2@h:21"}},
		{[]string{"--export", "siem=syslog+tls://127.0.0.1:6514?ca=/nonexistent/ca.pem"}},
		{[]string{"--export", "siem=http://h:1", "--export-format", "siem=xml"}},
		{[]string{"--export", "siem"}},
	} {
		cmd := exec.Command(binary, append([]string{"serve", "--addr", "127.0.0.1:0", "--db", t.TempDir()}, tc.args...)...)
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--export") || strings.Contains(string(out), "hunter2") {
			t.Errorf("serve %v: %v\n%s", tc.args, err, out)
		}
	}
}
