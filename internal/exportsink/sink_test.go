package exportsink_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs/trace"
	"github.com/acsledger/acsledger/internal/exportsink"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/export"
	"github.com/acsledger/acsledger/ledger/export/exporttest"
)

// deliver runs a Deliverer for the sink URL over l until stop is called.
func deliver(t *testing.T, l *exporttest.Ledger, name, url, format string) (*export.Deliverer, func()) {
	t.Helper()
	c, err := exportsink.Parse(name, url, format)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := exportsink.Open(c)
	if err != nil {
		t.Fatal(err)
	}
	d := &export.Deliverer{Name: name, Store: l, Sink: sink, Encoder: export.Encoder{Format: c.Format, Options: c.Options, Origin: "test.example/log"},
		Batch: 16, Poll: 10 * time.Millisecond, Timeout: time.Second, MaxBackoff: 100 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return d, stop
}

// hashOf is the entry hash an event carries, in any encoding.
func hashOf(t *testing.T, line string) string {
	t.Helper()
	var ev struct {
		ID       string `json:"id"`
		Unmapped struct {
			Acsledger struct {
				EntryHash string `json:"entry_hash"`
			} `json:"acsledger"`
		} `json:"unmapped"`
		Acsledger struct {
			EntryHash string `json:"entry_hash"`
		} `json:"acsledger"`
	}
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		t.Fatalf("not an event: %.200s: %v", line, err)
	}
	switch {
	case ev.ID != "":
		return ev.ID
	case ev.Acsledger.EntryHash != "":
		return ev.Acsledger.EntryHash
	}
	return ev.Unmapped.Acsledger.EntryHash
}

// waitAll waits until every entry hash of l is among what got returns,
// counted by hash; it returns the count per hash.
func waitAll(t *testing.T, l *exporttest.Ledger, what string, got func() []string) map[string]int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		seen := map[string]int{}
		for _, h := range got() {
			seen[h]++
		}
		missing := 0
		for _, h := range l.Hashes {
			if seen[h] == 0 {
				missing++
			}
		}
		if missing == 0 {
			return seen
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d entries never arrived", what, missing, len(l.Hashes))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSyslogRsyslog(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"tcp", false}, {"tls", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var tf *tlsFiles
			scheme := "syslog+tcp"
			if tc.tls {
				f := newTLSFiles(t)
				tf, scheme = &f, "syslog+tls"
			}
			r := startRsyslog(t, tf)
			l := exporttest.New(t)
			l.Append(t, 40)
			url := fmt.Sprintf("%s://127.0.0.1:%d", scheme, r.port)
			if tc.tls {
				url += "?ca=" + tf.CA
			}
			d, _ := deliver(t, l, "rs", url, "ocsf")
			hashes := func() []string {
				var out []string
				for _, line := range r.received() {
					if m := sdHash.FindStringSubmatch(line); m != nil {
						out = append(out, m[1])
					}
				}
				return out
			}
			waitAll(t, l, "rsyslog", hashes)
			// What rsyslog parsed: MSGID, our structured data, and the
			// event JSON as MSG naming the same entry.
			line := r.received()[0]
			msgid, rest, _ := strings.Cut(line, "|")
			sd, msg, _ := strings.Cut(rest, "|")
			if msgid != "ocsf" || !strings.HasPrefix(sd, `[acsledger@32473 session_id="sess-a-0" position="0" entry_hash="`+l.Hashes[0]+`"`) {
				t.Errorf("rsyslog parsed MSGID %q SD %q", msgid, sd)
			}
			if h := hashOf(t, strings.TrimSpace(msg)); h != l.Hashes[0] {
				t.Errorf("MSG names entry %s, want %s", h, l.Hashes[0])
			}

			// The receiver goes away for the middle of the run.
			r.stop()
			l.Append(t, 30)
			deadline := time.Now().Add(30 * time.Second)
			for !d.Status().Failing && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if st := d.Status(); !st.Failing || st.LastError == "" {
				t.Errorf("not failing while rsyslog was down: %+v", st)
			}
			r.restart()
			seen := waitAll(t, l, "rsyslog after its restart", hashes)
			// Duplicates by entry: a deny's entry has two events (its
			// Detection Finding), every fifth entry (exporttest.Entry).
			dups := 0
			for i, h := range l.Hashes {
				per := 1
				if i%5 == 4 {
					per = 2
				}
				dups += (seen[h]+per-1)/per - 1
			}
			// 70 entries, 14 denies with a second (finding) event.
			// Plain syslog confirms nothing: every entry is sent_unconfirmed
			// once, none acknowledged, and the receiver holds no more
			// duplicates than resent counts.
			pollUntil(t, "70 entries sent", func() bool { return d.Status().SentTo == 70 })
			st := d.Status()
			if st.Acknowledged != 0 || st.SentUnconfirmed != 70 || st.Delivery != "sent_unconfirmed" || int64(dups) > st.Resent {
				t.Errorf("counters with %d duplicates received: %+v", dups, st)
			}
			t.Logf("%d events for %d entries: %d duplicates received, %d entries counted as resent", len(hashes()), len(l.Hashes), dups, st.Resent)
		})
	}
}

func TestHTTPSink(t *testing.T) {
	t.Parallel()
	h := newHTTPReceiver(t, "siem", "s3cret-pw")
	l := exporttest.New(t)
	l.Append(t, 30)
	url := strings.Replace(h.srv.URL, "http://", "http://siem:s3cret-pw@", 1)
	d, stop := deliver(t, l, "collector", url, "cloudevents")
	got := func() []string {
		var out []string
		for _, line := range h.received() {
			out = append(out, hashOf(t, line))
		}
		return out
	}
	waitAll(t, l, "http", got)
	h.setDown(true)
	l.Append(t, 25)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(d.Status().LastError, "503") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	st := d.Status()
	if !strings.Contains(st.LastError, "503") || strings.Contains(st.LastError, "s3cret") || st.EntriesBehind == 0 {
		t.Errorf("while the collector answers 503: %+v", st)
	}
	h.setDown(false)
	waitAll(t, l, "http after the outage", got)
	stop()
	// CloudEvents, in order: each entry's event once per delivery, the
	// batches in leaf order.
	lines := h.received()
	var ce struct {
		SpecVersion string `json:"specversion"`
		Source      string `json:"source"`
		Subject     string `json:"subject"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &ce); err != nil || ce.SpecVersion != "1.0" || ce.Source == "" {
		t.Errorf("first event %s: %v", lines[0], err)
	}
	last := -1
	for _, line := range lines {
		i := slices.Index(l.Hashes, hashOf(t, line))
		if i < last-16 { // a redelivered batch starts at most one batch back
			t.Fatalf("entry %d after entry %d", i, last)
		}
		last = max(last, i)
	}
	if st := d.Status(); st.Acknowledged != 55 || st.NextLeaf != 55 || st.SentUnconfirmed != 0 {
		t.Errorf("after catching up: %+v", st)
	}
}

func TestOTLPSink(t *testing.T) {
	t.Parallel()
	o := newOTLPReceiver(t)
	l := exporttest.New(t)
	l.Append(t, 20)
	deliver(t, l, "otel", "otlp+http://"+strings.TrimPrefix(o.srv.URL, "http://"), "ocsf")
	waitAll(t, l, "otlp", func() []string {
		var out []string
		for _, b := range o.received() {
			out = append(out, hashOf(t, b))
		}
		return out
	})
	o.mu.Lock()
	a := o.attrs[0]
	o.mu.Unlock()
	if a["event_name"] != "acsledger.ocsf" || a["acsledger.entry_hash"] != l.Hashes[0] || a["acsledger.session_id"] != "sess-a-0" {
		t.Errorf("first record's attributes: %v", a)
	}
}

// The file sink rotates by size; a tailer that reads the rotated files
// in name order, then the live one, sees every entry in order.
func TestFileSinkRotates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := exporttest.New(t)
	l.Append(t, 60)
	deliver(t, l, "lake", "file://"+dir+"?max_bytes=4096", "acs")
	tail := func() []string {
		names, _ := filepath.Glob(filepath.Join(dir, "lake-*.ndjson"))
		sort.Strings(names)
		names = append(names, filepath.Join(dir, "lake.ndjson"))
		var out []string
		for _, n := range names {
			b, _ := os.ReadFile(n)
			for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
				if line != "" {
					out = append(out, hashOf(t, line))
				}
			}
		}
		return out
	}
	waitAll(t, l, "file", tail)
	got := tail()
	if !slices.Equal(got, l.Hashes) {
		t.Errorf("the tailer read %d events, not the %d entries in order", len(got), len(l.Hashes))
	}
	rotated, _ := filepath.Glob(filepath.Join(dir, "lake-*.ndjson"))
	if len(rotated) < 2 {
		t.Errorf("%d rotated files at 4096 bytes each", len(rotated))
	}
}

// A receiver that accepts the connection and never reads: Send gives up
// at its timeout, delivery reports the error, appends go on, and the
// loop stops promptly.
func TestReceiverThatNeverReads(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	l := exporttest.New(t)
	l.Append(t, 20)
	d, stop := deliver(t, l, "hole", "http://"+ln.Addr().String()+"/ingest", "ocsf")
	start := time.Now()
	for d.Status().LastError == "" && time.Since(start) < 10*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	if st := d.Status(); st.LastError == "" || !st.Failing || st.Acknowledged != 0 || st.EntriesBehind != 20 {
		t.Fatalf("after the timeout: %+v", st)
	}
	// The ledger does not wait for the sink: an append commits while the
	// sink's sends hang (a generous bound: the box is shared).
	appendStart := time.Now()
	if _, err := l.Store.Append(context.Background(), ledger.Record{SessionID: "sess-hung", AgentID: "team-a/bot", Entry: exporttest.Entry(999)}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(appendStart); took > 5*time.Second {
		t.Errorf("an append took %v with a hung sink", took)
	}
	stopStart := time.Now()
	stop()
	if time.Since(stopStart) > 3*time.Second {
		t.Errorf("stopping delivery took %v", time.Since(stopStart))
	}
}

func TestParseRefusesBadSinks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct{ flag, format, want string }{
		{"siem=ftp://h:1", "", `unknown scheme "ftp"`},
		{"siem=syslog+tcp://host", "", "with a port"},
		{"siem=syslog+tls://127.0.0.1:6514?ca=" + dir + "/missing.pem", "", "couldn't read the CA file"},
		{"siem=http://h:1", "xml", `--export-format siem: unknown event format "xml"`},
		{"siem=file:relative", "", "file:///ABSOLUTE/DIR"},
		{"siem=syslog+tcp://u:hunter2@h:514", "", "syslog+tcp takes no user or password"},
		{"siem=http://h:1?allow_tools=maybe", "", "allow_tools"},
		{"bad name=http://h:1", "", "want NAME=URL"},
		{"nourl", "", "want NAME=URL"},
		{"siem=127.0.0.1:514", "", "not a URL"},
		{"siem=localhost:514", "", "unknown scheme"},
	} {
		_, err := exportsink.Configure([]string{tc.flag}, formats(tc.format))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--export") {
			t.Errorf("--export %s: %v, want an error naming the flag and %q", tc.flag, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("--export %s: the error shows the password: %v", tc.flag, err)
		}
	}
	if _, err := exportsink.Configure([]string{"a=http://h:1", "a=http://h:2"}, nil); err == nil {
		t.Error("a name given twice was accepted")
	}
	if _, err := exportsink.Configure([]string{"a=http://h:1"}, []string{"b=ocsf"}); err == nil {
		t.Error("a format for no sink was accepted")
	}
	c, err := exportsink.Parse("s", "https://alice:pw-123@siem.example/hec?token=tok-456&allow_tools=1&allow_args=path,mode", "")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(c.Redacted, "pw-123") || strings.Contains(c.Redacted, "tok-456") || c.Format != trace.OCSF ||
		!c.Options.AllowTools || !slices.Equal(c.Options.AllowArgKeys, []string{"path", "mode"}) {
		t.Errorf("parsed %+v", c)
	}
}

func formats(f string) []string {
	if f == "" {
		return nil
	}
	return []string{"siem=" + f}
}
