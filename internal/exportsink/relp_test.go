package exportsink_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/exportsink"
	"github.com/acsledger/acsledger/ledger/export"
	"github.com/acsledger/acsledger/ledger/export/exporttest"
)

// startRELP starts a real rsyslogd receiving RELP (imrelp, over TLS with
// tf) on a loopback port and writing each message as
// "MSGID|STRUCTURED-DATA|MSG" lines to r.out.
//
// Its configuration (the one docs/export.md gives) makes imrelp's
// acknowledgement mean "written to the file". imrelp answers a syslog
// command "200 OK" once it has handed the message to its ruleset's queue;
// rsyslog's default queue is in memory, so a kill -9 would lose what it
// had acknowledged (and with it, a SIGTERM did here). With the ruleset's
// queue Direct, handing a message over runs the ruleset in imrelp's own
// thread: the omfile action (on a direct action queue, the default)
// takes each message as a transaction of its own and, with flushOnTXEnd
// and no async writing, write(2)s the line before imrelp sends the rsp.
// A killed rsyslogd then loses nothing it acknowledged (the page cache
// outlives the process; a power cut would need fsync, which is not what
// these tests are about).
func startRELP(tb testing.TB, tf *tlsFiles) *rsyslog {
	tb.Helper()
	missing := tb.Skipf
	if os.Getenv("CI") == "true" {
		missing = tb.Fatalf
	}
	bin, err := exec.LookPath("rsyslogd")
	if err != nil {
		bin = "/usr/sbin/rsyslogd"
		if _, err := os.Stat(bin); err != nil {
			missing("rsyslogd not installed (Debian: apt-get install rsyslog rsyslog-relp rsyslog-gnutls; .ci/run does)")
		}
	}
	if mods, _ := filepath.Glob("/usr/lib/*/rsyslog/imrelp.so"); len(mods) == 0 {
		missing("rsyslog's imrelp not installed (Debian: apt-get install rsyslog-relp; .ci/run does)")
	}
	r := &rsyslog{t: tb, dir: tb.TempDir(), port: freePort(tb), bin: bin}
	r.out = filepath.Join(r.dir, "received.log")
	input := fmt.Sprintf(`input(type="imrelp" address="127.0.0.1" port="%d" maxDataSize="1m" ruleset="acsledger"`, r.port)
	if tf != nil {
		// imrelp with a certificate of its own asks for the client's and,
		// by default, checks it against a fingerprint list; "name" checks
		// that the CA signed it and that it names a permitted peer.
		input += fmt.Sprintf(` tls="on" tls.caCert=%q tls.myCert=%q tls.myPrivKey=%q tls.authMode="name" tls.permittedPeer=["127.0.0.1"]`, tf.CA, tf.Cert, tf.Key)
	}
	conf := fmt.Sprintf(`global(workDirectory=%q maxMessageSize="1m")
module(load="imrelp")
%s)
template(name="fields" type="list") {
  property(name="msgid") constant(value="|")
  property(name="structured-data") constant(value="|")
  property(name="msg") constant(value="\n")
}
ruleset(name="acsledger" queue.type="Direct") {
  action(type="omfile" file=%q template="fields" asyncWriting="off" flushOnTXEnd="on")
}
`, r.dir, input, r.out)
	r.conf = filepath.Join(r.dir, "rsyslog.conf")
	if err := os.WriteFile(r.conf, []byte(conf), 0o600); err != nil {
		tb.Fatal(err)
	}
	r.start(bin)
	tb.Cleanup(r.stop)
	return r
}

// kill stops rsyslogd with SIGKILL: nothing is flushed, nothing said.
func (r *rsyslog) kill() {
	r.t.Helper()
	if err := r.cmd.Process.Kill(); err != nil {
		r.t.Fatal(err)
	}
	r.cmd.Wait()
	r.cmd = nil
}

// hashes are the entry hashes of the messages rsyslog wrote so far.
func (r *rsyslog) hashes() []string {
	var out []string
	for _, line := range r.received() {
		if m := sdHash.FindStringSubmatch(line); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

// poll waits for cond, failing the test with what after a deadline far
// past what any box needs.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting after 2 minutes: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// RELP to rsyslogd stopped mid-stream three times by kill -9 and three
// times by SIGTERM, started again each time: every entry arrives, what
// the sink counted as acknowledged was on rsyslog's disk at each stop,
// and in the end acknowledged is the number of entries.
func TestRELPRsyslogStops(t *testing.T) {
	t.Parallel()
	r := startRELP(t, nil)
	l := exporttest.New(t)
	l.Append(t, 50)
	d, stop := deliver(t, l, "siem", fmt.Sprintf("relp://127.0.0.1:%d", r.port), "ocsf")
	for round := range 6 {
		how := "kill -9"
		if round%2 == 1 {
			how = "SIGTERM"
		}
		from := d.Status().NextLeaf
		l.Append(t, 200)
		poll(t, fmt.Sprintf("round %d: delivery to move past leaf %d", round, from), func() bool { return d.Status().NextLeaf > from })
		stoppedAt := time.Now()
		if how == "kill -9" {
			r.kill()
		} else {
			r.stop()
		}
		// Everything acknowledged is on disk: the cursor never runs
		// ahead of what the receiver holds.
		st := d.Status()
		on := map[string]bool{}
		for _, h := range r.hashes() {
			on[h] = true
		}
		for i, h := range l.Hashes[:st.NextLeaf] {
			if !on[h] {
				t.Fatalf("round %d (%s): entry %d was acknowledged but is not in rsyslog's file", round, how, i)
			}
		}
		t.Logf("round %d: %s with %d of %d entries acknowledged", round, how, st.NextLeaf, len(l.Hashes))
		// Entries appended while the receiver is down fail a send.
		l.Append(t, 20)
		poll(t, "a delivery error while rsyslogd is down", func() bool {
			at := d.Status().LastErrorAt
			return at != nil && at.After(stoppedAt)
		})
		r.restart()
	}
	l.Append(t, 20)
	poll(t, "every entry acknowledged", func() bool { return d.Status().NextLeaf == uint64(len(l.Hashes)) })
	stop()
	seen := map[string]int{}
	for _, h := range r.hashes() {
		seen[h]++
	}
	missing := 0
	for _, h := range l.Hashes {
		if seen[h] == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d entries never arrived", missing, len(l.Hashes))
	}
	st := d.Status()
	if st.Acknowledged != int64(len(l.Hashes)) {
		t.Errorf("acknowledged = %d, want the %d entries", st.Acknowledged, len(l.Hashes))
	}
	lines := r.received()
	dups := len(lines)
	slices.Sort(lines)
	dups -= len(slices.Compact(lines))
	t.Logf("%d entries, %d messages received of which %d twice or more, resent %d", len(l.Hashes), len(r.received()), dups, st.Resent)
}

// relp+tls to rsyslogd's imrelp over TLS (librelp's GnuTLS), each side
// checking the other's certificate against the test's CA (imrelp asks
// for a client certificate once it has one of its own), across a
// restart.
func TestRELPTLSRsyslog(t *testing.T) {
	t.Parallel()
	tf := newTLSFiles(t)
	r := startRELP(t, &tf)
	l := exporttest.New(t)
	l.Append(t, 40)
	d, stop := deliver(t, l, "siem", fmt.Sprintf("relp+tls://127.0.0.1:%d?ca=%s&cert=%s&key=%s&window=8", r.port, tf.CA, tf.Cert, tf.Key), "ocsf")
	waitAll(t, l, "rsyslog over relp+tls", r.hashes)
	line := r.received()[0]
	msgid, rest, _ := strings.Cut(line, "|")
	sd, msg, _ := strings.Cut(rest, "|")
	if msgid != "ocsf" || !strings.HasPrefix(sd, `[acsledger@32473 session_id="sess-a-0" position="0" entry_hash="`+l.Hashes[0]+`"`) {
		t.Errorf("rsyslog parsed MSGID %q SD %q", msgid, sd)
	}
	if h := hashOf(t, strings.TrimSpace(msg)); h != l.Hashes[0] {
		t.Errorf("MSG names entry %s, want %s", h, l.Hashes[0])
	}
	r.stop()
	l.Append(t, 30)
	r.restart()
	waitAll(t, l, "rsyslog over relp+tls after its restart", r.hashes)
	poll(t, "every entry acknowledged", func() bool { return d.Status().NextLeaf == uint64(len(l.Hashes)) })
	stop()
	if st := d.Status(); st.Acknowledged != int64(len(l.Hashes)) {
		t.Errorf("acknowledged = %d, want %d", st.Acknowledged, len(l.Hashes))
	}
}

// A server that refuses one command, or says serverclose in the middle
// of a batch, fails the whole batch; the next session takes it.
func TestRELPFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, answer, want string
	}{
		{"refused", "500 cannot store it", `refused txnr 4: "500 cannot store it"`},
		{"serverclose", "", "serverclose"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			sessions := make(chan []string, 2)
			go func() {
				for n := 0; ; n++ {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					// The first session answers the third event with tc.answer.
					sessions <- scriptedRELP(c, func(txnr int) string {
						if n == 0 && txnr == 4 {
							return tc.answer
						}
						return "200 OK"
					})
				}
			}()
			c, err := exportsink.Parse("s", "relp://"+ln.Addr().String()+"?window=2", "ocsf")
			if err != nil {
				t.Fatal(err)
			}
			sink, err := exportsink.Open(c)
			if err != nil {
				t.Fatal(err)
			}
			defer sink.Close()
			batch := make([]export.Event, 5)
			for i := range batch {
				batch[i] = export.Event{RecordedAt: time.Unix(1, 0), SessionID: "s", Position: int64(i), EntryHash: strconv.Itoa(i), Cursor: "c", JSON: []byte(`{}`)}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err = sink.Send(ctx, batch)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "export sink s") {
				t.Fatalf("Send: %v, want an error naming the sink and %q", err, tc.want)
			}
			if err := sink.Send(ctx, batch); err != nil {
				t.Fatalf("Send on a new session: %v", err)
			}
			sink.Close()
			first, second := <-sessions, <-sessions
			if len(first) < 3 || len(second) != 5 {
				t.Fatalf("sessions got %d and %d syslog commands", len(first), len(second))
			}
			if !strings.HasPrefix(second[4], "<110>1 1970-01-01T00:00:01.000000Z ") || !strings.HasSuffix(second[4], ` entry_hash="4" cursor="c"] {}`) {
				t.Errorf("the fifth message: %q", second[4])
			}
		})
	}
}

// scriptedRELP serves one RELP session on c, answering each syslog
// command with an rsp of status answer(txnr), or with serverclose when
// that is "", and close with an rsp; it returns the syslog messages it
// read once the client closes the connection.
func scriptedRELP(c net.Conn, answer func(txnr int) string) (syslog []string) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		var txnr, n int
		var cmd string
		if _, err := fmt.Fscanf(r, "%d %s %d", &txnr, &cmd, &n); err != nil {
			return syslog
		}
		data := make([]byte, n+1)
		if n > 0 {
			data = make([]byte, n+2) // SP DATA LF
		}
		if _, err := io.ReadFull(r, data); err != nil {
			return syslog
		}
		data = data[:len(data)-1]
		if n > 0 {
			data = data[1:]
		}
		var out string
		switch cmd {
		case "open":
			offers := "200 OK\nrelp_version=0\nrelp_software=test\ncommands=syslog"
			out = fmt.Sprintf("%d rsp %d %s\n", txnr, len(offers), offers)
		case "syslog":
			syslog = append(syslog, string(data))
			out = "0 serverclose 0\n"
			if a := answer(txnr); a != "" {
				out = fmt.Sprintf("%d rsp %d %s\n", txnr, len(a), a)
			}
		case "close":
			out = fmt.Sprintf("%d rsp 0\n0 serverclose 0\n", txnr)
		}
		if _, err := io.WriteString(c, out); err != nil {
			return syslog
		}
	}
}

func TestRELPParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, want string }{
		{"relp://127.0.0.1", "with a port"},
		{"relp://127.0.0.1:2514?window=0", "window"},
		{"relp://127.0.0.1:2514?window=many", "window"},
		{"relp://u:hunter2@127.0.0.1:2514", "no user or password"},
		{"relp://127.0.0.1:2514?ca=/x.pem", "TLS"},
		{"relp+tls://127.0.0.1:2514?ca=/nonexistent/ca.pem", "CA file"},
	} {
		_, err := exportsink.Parse("siem", tc.url, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v, want an error about %s", tc.url, err, tc.want)
		}
	}
	if _, err := exportsink.Parse("siem", "relp+tls://127.0.0.1:2514?window=16&server_name=siem.example", ""); err != nil {
		t.Error(err)
	}
}
