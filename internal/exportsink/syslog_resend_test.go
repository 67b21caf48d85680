package exportsink_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/exportsink"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/ledger/export"
	"github.com/acsledger/acsledger/ledger/export/exporttest"
	"github.com/acsledger/acsledger/verify"
)

// pollUntil waits for cond, with a deadline long enough for a loaded box.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startQueuedRsyslog is rsyslogd as docs/export.md recommends it for
// acsledger: imtcp into a ruleset with a disk-assisted queue that is saved
// on shutdown. Its output file is in outDir, which, when it does not exist
// yet, holds every message in the queue (the action retries for ever).
func startQueuedRsyslog(t *testing.T, outDir string) *rsyslog {
	t.Helper()
	bin, err := findRsyslogd()
	if err != nil {
		t.Fatal(err)
	}
	r := &rsyslog{t: t, dir: t.TempDir(), port: freePort(t), bin: bin}
	r.out = filepath.Join(outDir, "received.log")
	conf := fmt.Sprintf(`global(workDirectory=%q maxMessageSize="1m")
module(load="imtcp")
input(type="imtcp" address="127.0.0.1" port="%d" ruleset="acsledger")
template(name="fields" type="list") {
  property(name="msgid") constant(value="|")
  property(name="structured-data") constant(value="|")
  property(name="msg") constant(value="\n")
}
ruleset(name="acsledger" queue.type="LinkedList" queue.filename="acsledger" queue.saveOnShutdown="on") {
  action(type="omfile" file=%q template="fields" createDirs="off" asyncWriting="off" flushOnTXEnd="on"
         action.resumeRetryCount="-1" action.resumeInterval="1")
}
`, r.dir, r.port, r.out)
	r.conf = filepath.Join(r.dir, "rsyslog.conf")
	if err := os.WriteFile(r.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	r.start(bin)
	t.Cleanup(r.stop)
	return r
}

// findRsyslogd finds rsyslogd; a missing one fails the test.
func findRsyslogd() (string, error) {
	if p, err := exec.LookPath("rsyslogd"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/rsyslogd", "/sbin/rsyslogd"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("rsyslogd not installed (Debian: apt-get install rsyslog; .ci/run does)")
}

// deliverFrom runs a Deliverer of OCSF events whose log_name is origin,
// the ledger's own, so that the events check can re-encode them.
func deliverFrom(t *testing.T, l *exporttest.Ledger, origin, name, url string) *export.Deliverer {
	t.Helper()
	c, err := exportsink.Parse(name, url, "ocsf")
	if err != nil {
		t.Fatal(err)
	}
	sink, err := exportsink.Open(c)
	if err != nil {
		t.Fatal(err)
	}
	d := &export.Deliverer{Name: name, Store: l, Sink: sink, Encoder: export.Encoder{Format: c.Format, Origin: origin},
		Batch: 16, Poll: 10 * time.Millisecond, Timeout: 5 * time.Second, MaxBackoff: 100 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return d
}

// kill9 ends rsyslogd with SIGKILL: what its queue held in memory is lost.
func (r *rsyslog) kill9() {
	r.t.Helper()
	r.cmd.Process.Signal(syscall.SIGKILL)
	r.cmd.Wait()
	r.cmd = nil
}

// receivedHashes counts the entry hashes in rsyslog's output.
func (r *rsyslog) receivedHashes() map[string]int {
	seen := map[string]int{}
	for _, line := range r.received() {
		if m := sdHash.FindStringSubmatch(line); m != nil {
			seen[m[1]]++
		}
	}
	return seen
}

// Plain TCP into rsyslogd's disk-assisted queue, SIGTERM mid-stream three
// times (rsyslogd started again after each): every entry arrives, counted
// by entry hash. Failing is 1 while rsyslogd is down; nothing counts as
// acknowledged; every entry is sent_unconfirmed once.
func TestSyslogResendSIGTERM(t *testing.T) {
	t.Parallel()
	r := startQueuedRsyslog(t, t.TempDir())
	l := exporttest.New(t)
	d, _ := deliver(t, l, "siem", fmt.Sprintf("syslog+tcp://127.0.0.1:%d", r.port), "ocsf")
	for round := range 3 {
		l.Append(t, 150) // sent in batches of 16 while rsyslogd stops
		r.stop()
		l.Append(t, 20)
		pollUntil(t, fmt.Sprintf("round %d: failing while rsyslogd is stopped", round), func() bool { return d.Status().Failing })
		r.restart()
	}
	l.Append(t, 10)
	pollUntil(t, "every entry at rsyslogd", func() bool {
		seen := r.receivedHashes()
		for _, h := range l.Hashes {
			if seen[h] == 0 {
				return false
			}
		}
		return true
	})
	pollUntil(t, "caught up", func() bool { st := d.Status(); return st.SentTo == uint64(len(l.Hashes)) && !st.Failing })
	st := d.Status()
	if st.Acknowledged != 0 || st.SentUnconfirmed != int64(len(l.Hashes)) || st.Delivery != "sent_unconfirmed" {
		t.Errorf("counters: %+v", st)
	}
	dups := 0
	for _, n := range r.receivedHashes() {
		dups += n - 1
	}
	t.Logf("%d entries, all received; %d duplicate messages at rsyslogd, resent %d", len(l.Hashes), dups, st.Resent)
}

// Plain TCP into rsyslogd whose queue holds every message in memory (its
// output cannot be written yet), with no re-send window: kill -9 loses
// what rsyslogd had taken. The counters say none of it was acknowledged,
// and acsverify's events check against the sessions' bundles names
// exactly the entries that never arrived.
func TestSyslogKill9IsReported(t *testing.T) {
	t.Parallel()
	outDir := filepath.Join(t.TempDir(), "out")
	r := startQueuedRsyslog(t, outDir)
	l := exporttest.New(t)
	l.Append(t, 30)
	d := deliverFrom(t, l, l.Log.Origin(), "siem", fmt.Sprintf("syslog+tcp://127.0.0.1:%d?resend_window=0s", r.port))
	pollUntil(t, "30 entries out of the window", func() bool { st := d.Status(); return st.NextLeaf == 30 && st.SentTo == 30 })
	r.kill9()
	pollUntil(t, "failing after kill -9", func() bool { return d.Status().Failing })
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	r.restart()
	l.Append(t, 10)
	pollUntil(t, "the entries after the restart at rsyslogd", func() bool {
		seen := r.receivedHashes()
		for _, h := range l.Hashes[30:] {
			if seen[h] == 0 {
				return false
			}
		}
		return true
	})
	pollUntil(t, "caught up", func() bool { st := d.Status(); return st.SentTo == 40 && !st.Failing })
	st := d.Status()
	if st.Acknowledged != 0 || st.SentUnconfirmed != 40 || st.Resent != 0 {
		t.Errorf("counters after kill -9: %+v", st)
	}
	seen := r.receivedHashes()
	missing := map[string]bool{}
	for _, h := range l.Hashes {
		if seen[h] == 0 {
			missing[h] = true
		}
	}
	if len(missing) != 30 {
		t.Errorf("%d entries missing at rsyslogd, want the 30 its memory held at kill -9", len(missing))
	}

	// The copy rsyslogd holds, checked as acsverify events --bundle does.
	var events bytes.Buffer
	for _, line := range r.received() {
		_, rest, _ := strings.Cut(line, "|")
		_, msg, _ := strings.Cut(rest, "|")
		events.WriteString(strings.TrimSpace(msg) + "\n")
	}
	var bundles [][]byte
	for _, session := range []string{"sess-a-0", "sess-b-0"} {
		var b bytes.Buffer
		if _, err := evidence.Build(context.Background(), l.Store, l.Log, session, &b, evidence.Options{}); err != nil {
			t.Fatal(err)
		}
		bundles = append(bundles, b.Bytes())
	}
	rep, err := verify.VerifyEvents(bundles, &events, nil)
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, f := range rep.Findings {
		if f.Code != verify.CodeEventMissing {
			t.Errorf("finding %s: %s", f.Code, f.Message)
			continue
		}
		named[f.Expected] = true
	}
	if len(named) != len(missing) {
		t.Errorf("acsverify names %d entries missing, %d are", len(named), len(missing))
	}
	for h := range missing {
		if !named[h] {
			t.Errorf("entry %s never arrived and acsverify does not name it", h)
		}
	}
}

// ?resend_window= takes a duration from 0s to 24h; anything else stops
// serve naming the parameter.
func TestResendWindowParameter(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"0s", "90s", "24h"} {
		if _, err := exportsink.Parse("siem", "syslog+tcp://127.0.0.1:514?resend_window="+v, ""); err != nil {
			t.Errorf("resend_window=%s: %v", v, err)
		}
	}
	for _, v := range []string{"forever", "-1s", "25h", "60"} {
		_, err := exportsink.Parse("siem", "syslog+tls://127.0.0.1:6514?resend_window="+v, "")
		if err == nil || !strings.Contains(err.Error(), "resend_window") || !strings.Contains(err.Error(), "--export siem") {
			t.Errorf("resend_window=%s: %v, want an error naming the flag and the parameter", v, err)
		}
	}
	if _, err := exportsink.Parse("siem", "http://127.0.0.1:80/?resend_window=60s", ""); err == nil {
		t.Error("resend_window accepted for an http sink, which has no window")
	}
}
