package tsa_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/internal/tlogdb"
	"github.com/acsledger/acsledger/internal/tsatest"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/ledger/tlog/tlogstoretest"
	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
	"github.com/acsledger/acsledger/ledger/tsa"
	"github.com/acsledger/acsledger/verify"
	"github.com/acsledger/acsledger/web/tlogserve"
)

func TestMain(m *testing.M) { tlogdb.Main(m) }

// startTSA starts a real authority (tsatest) and returns it with its CA
// as the pool a verifier trusts.
func startTSA(tb testing.TB) (*tsatest.TSA, *x509.CertPool) {
	tb.Helper()
	a := tsatest.Start(tb)
	roots, err := verify.ParseTSACerts(a.CACert)
	if err != nil {
		tb.Fatal(err)
	}
	return a, roots
}

// stampPending stamps the fixture's pending checkpoints with a's
// authority, failing tb when none was stamped, and returns the stamper.
func stampPending(tb testing.TB, f *evidencetest.Fixture, a *tsatest.TSA, roots *x509.CertPool) *tsa.Stamper {
	tb.Helper()
	s := tsa.NewStamper(f.Store.LogStorage().Timestamps, tsa.NewClient(a.URL, roots, nil), tsa.StamperConfig{})
	if n, err := s.StampPending(context.Background()); err != nil || n == 0 {
		tb.Fatalf("stamped %d: %v", n, err)
	}
	return s
}

func TestStamperSQLite(t *testing.T)   { testStamper(t, tlogdb.SQLiteDB(t)) }
func TestStamperPostgres(t *testing.T) { testStamper(t, tlogdb.PGDB(t)) }

// testStamper runs the log over a real store with a real authority
// (openssl ts) that is down for the first two checkpoints: they go out
// unstamped, the log keeps signing, and both are stamped once it is back.
// The stored responses are served over HTTP and checked by our verifier
// and by openssl's own, and a tampered one is refused.
func testStamper(t *testing.T, db tlogstoretest.DB) {
	ctx := context.Background()
	a, roots := startTSA(t)
	st := db.Storage
	if st.Timestamps == nil {
		t.Fatal("the store keeps no time-stamps")
	}
	l := tlogstoretest.NewLog(t, st, tlog.Config{})
	s := tsa.NewStamper(st.Timestamps, tsa.NewClient(a.URL, roots, nil), tsa.StamperConfig{})

	a.SetDown(true)
	db.Append(t, "s", 0, 3)
	tlogtest.IntegrateAll(t, l)
	if n, err := s.StampPending(ctx); err == nil || n != 0 {
		t.Fatalf("authority down: stamped %d, err %v; want 0 and an error", n, err)
	}
	db.Append(t, "s", 3, 2)
	tlogtest.IntegrateAll(t, l) // the log does not wait for the authority
	if _, err := s.StampPending(ctx); err == nil {
		t.Fatal("authority still down, but the round reported no error")
	}
	if got := s.Status(); got.Unstamped != 2 || got.StampedSize != 0 {
		t.Fatalf("status while down: %+v, want 2 unstamped, nothing stamped", got)
	}
	if _, err := l.Timestamp(ctx, 5); !errors.Is(err, tlog.ErrNotFound) {
		t.Fatalf("time-stamp of an unstamped checkpoint: %v, want ErrNotFound", err)
	}

	a.SetDown(false)
	if n, err := s.StampPending(ctx); err != nil || n != 2 {
		t.Fatalf("authority back: stamped %d, err %v; want 2", n, err)
	}
	if got := s.Status(); got.Unstamped != 0 || got.StampedSize != 5 {
		t.Fatalf("status after catching up: %+v", got)
	}
	if n, err := s.StampPending(ctx); err != nil || n != 0 || a.Stamped() != 2 {
		t.Fatalf("a second round stamped %d (err %v), authority answered %d times; want nothing new", n, err, a.Stamped())
	}

	srv := httptest.NewServer(tlogserve.Handler(l, nil))
	defer srv.Close()
	dir := t.TempDir()
	for _, size := range []uint64{3, 5} {
		note := get(t, srv.URL+"/api/v1/checkpoints/"+itoa(size), "text/plain; charset=utf-8")
		resp := get(t, srv.URL+"/api/v1/checkpoints/"+itoa(size)+"/timestamp", "application/timestamp-reply")
		when, err := verify.CheckTimestamp(resp, note, roots)
		if err != nil {
			t.Fatalf("checkpoint %d: %v", size, err)
		}
		if d := time.Since(when); d < -time.Minute || d > time.Minute {
			t.Errorf("checkpoint %d stamped at %v, not now", size, when)
		}
		// openssl's verifier, independent of ours, agrees.
		text, _ := verify.CheckpointText(note)
		tf, rf := filepath.Join(dir, "text"), filepath.Join(dir, "resp.tsr")
		os.WriteFile(tf, text, 0o600)
		os.WriteFile(rf, resp, 0o600)
		if out, err := exec.Command("openssl", "ts", "-verify", "-in", rf, "-data", tf, "-CAfile", a.CACertFile).CombinedOutput(); err != nil || !strings.Contains(string(out), "Verification: OK") {
			t.Fatalf("openssl ts -verify of checkpoint %d: %v: %s", size, err, out)
		}
	}
	// Served for nothing beyond the log, and with a clear 400 for junk.
	for path, want := range map[string]int{"/api/v1/checkpoints/6/timestamp": 404, "/api/v1/checkpoints/05/timestamp": 400, "/api/v1/checkpoints/x/timestamp": 400} {
		r, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, r.StatusCode, want)
		}
	}

	// The response of checkpoint 3 does not stamp checkpoint 5.
	resp3, _ := l.Timestamp(ctx, 3)
	note5, _ := l.CheckpointAt(ctx, 5)
	if _, err := verify.CheckTimestamp(resp3, note5, roots); err == nil {
		t.Fatal("checkpoint 3's time-stamp verified for checkpoint 5")
	}
	// A time-stamp is written once: a second one for a size keeps the first.
	if err := st.Timestamps.AddTimestamp(ctx, 3, []byte("other"), time.Now()); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.Timestamp(ctx, 3); !bytes.Equal(got, resp3) {
		t.Fatal("a second time-stamp replaced the first")
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

func get(t *testing.T, url, ct string) []byte {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode != 200 || r.Header.Get("Content-Type") != ct {
		t.Fatalf("GET %s: %d %s: %s", url, r.StatusCode, r.Header.Get("Content-Type"), b)
	}
	return b
}

// TestTimestampMangled changes every byte of a real authority's response
// in turn (and the checkpoint text it stamps). CMS leaves parts unsigned
// (the certificate bag, the digestAlgorithms set, the content type beside
// the signed content), so some changes still verify; none may change what
// the token vouches for: that this checkpoint existed at this time, by a
// signer the trusted CA certified. Most must fail outright.
func TestTimestampMangled(t *testing.T) {
	ctx := context.Background()
	a, roots := startTSA(t)
	note := []byte("acsledger.test/log\n5\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n\u2014 acsledger.test/log AAAA\n")
	resp, err := tsa.NewClient(a.URL, roots, nil).Stamp(ctx, note)
	if err != nil {
		t.Fatal(err)
	}
	when, err := verify.CheckTimestamp(resp, note, roots)
	if err != nil {
		t.Fatal(err)
	}
	survived := 0
	for i := range resp {
		m := bytes.Clone(resp)
		m[i] ^= 0x01
		if got, err := verify.CheckTimestamp(m, note, roots); err == nil {
			survived++
			if !got.Equal(when) {
				t.Errorf("response with byte %d changed verifies with time %v, not %v", i, got, when)
			}
		}
	}
	if survived > len(resp)/3 {
		t.Errorf("%d of %d single-byte changes still verify", survived, len(resp))
	}
	for i := range bytes.Index(note, []byte("\n\n")) + 1 {
		m := bytes.Clone(note)
		m[i] ^= 0x01
		if _, err := verify.CheckTimestamp(resp, m, roots); err == nil {
			t.Errorf("checkpoint text with byte %d changed still verifies", i)
		}
	}
	// Another authority's CA is not trusted for it.
	other, _ := verify.ParseTSACerts(tsatest.Start(t).CACert)
	if _, err := verify.CheckTimestamp(resp, note, other); err == nil {
		t.Error("verified against another authority's CA")
	}
	// A response truncated or padded is refused.
	if _, err := verify.CheckTimestamp(append(bytes.Clone(resp), 0), note, roots); err == nil {
		t.Error("response with trailing data verifies")
	}
}
