package witness_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/tlogdb"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
	"github.com/acsledger/acsledger/ledger/tlog/witness"
	"github.com/acsledger/acsledger/verify"
	"github.com/acsledger/acsledger/web/tlogserve"
	"golang.org/x/mod/sumdb/note"
)

const witnessName = "witness.test/w1"

var clock = func() time.Time { return time.Unix(1767225600, 0) }

type loop struct {
	log       *tlog.Log
	logURL    string
	logVKey   string
	witURL    string
	witVKey   string
	witSeed   [32]byte
	statePath string
}

// setup runs a log and a witness as real HTTP servers on loopback ports,
// the log configured to ask the witness.
func setup(t *testing.T) (*loop, func(from, n int64)) {
	t.Helper()
	st := tlogdb.SQLite(t)
	lskey, lvkey, _ := tlog.KeyFromSeed(tlogtest.Origin, tlog.Ed25519, tlogtest.Seed("log"))
	seed := tlogtest.Seed("witness")
	wskey, wvkey, _ := tlog.KeyFromSeed(witnessName, tlog.CosignatureEd25519, seed)
	lp := &loop{logVKey: lvkey, witVKey: wvkey, witSeed: seed, statePath: filepath.Join(t.TempDir(), "state.json")}
	w, err := witness.New(witness.Config{Key: wskey, Logs: []witness.Log{{Origin: tlogtest.Origin, VerifierKeys: []string{lvkey}}}, StatePath: lp.statePath, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	wsrv := httptest.NewServer(w)
	t.Cleanup(wsrv.Close)
	lp.witURL = wsrv.URL
	l, err := tlog.New(context.Background(), st.LogStorage(), tlog.Config{
		Origin: tlogtest.Origin, Keys: []string{lskey},
		Witnesses:  []tlog.WitnessConfig{{URL: wsrv.URL, VerifierKey: wvkey}},
		BatchDelay: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	lp.log = l
	lsrv := httptest.NewServer(tlogserve.Handler(l, nil))
	t.Cleanup(lsrv.Close)
	lp.logURL = lsrv.URL
	return lp, func(from, n int64) { tlogdb.AppendSQLite(t, st, "s", from, n) }
}

// checkCosigned verifies the served checkpoint's log signature with
// sumdb/note and the witness cosignature by hand from the tlog-cosignature
// spec, and returns the checkpoint size line.
func checkCosigned(t *testing.T, lp *loop, signed []byte) string {
	t.Helper()
	lv, _ := note.NewVerifier(lp.logVKey)
	n, err := note.Open(signed, note.VerifierList(lv))
	if err != nil {
		t.Fatalf("log signature: %v", err)
	}
	var found bool
	for _, s := range n.UnverifiedSigs {
		if s.Name != witnessName {
			continue
		}
		raw, _ := base64.StdEncoding.DecodeString(s.Base64)
		ts := binary.BigEndian.Uint64(raw[4:12])
		msg := fmt.Appendf(nil, "cosignature/v1\ntime %d\n%s", ts, n.Text)
		pub := ed25519.NewKeyFromSeed(lp.witSeed[:]).Public().(ed25519.PublicKey)
		if !ed25519.Verify(pub, msg, raw[12:]) || int64(ts) != clock().Unix() {
			t.Fatalf("witness cosignature does not verify (ts %d)", ts)
		}
		found = true
	}
	if !found {
		t.Fatalf("no witness cosignature on\n%s", signed)
	}
	wv, _ := verify.NoteVerifier(lp.witVKey)
	if _, err := note.Open(signed, note.VerifierList(wv)); err != nil {
		t.Fatalf("verify.NoteVerifier rejects the cosignature: %v", err)
	}
	return strings.Split(n.Text, "\n")[1]
}

func TestWitnessLoopEndToEnd(t *testing.T) {
	t.Parallel()
	lp, appendN := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lp.log.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Run = %v", err)
		}
	}()
	waitFor := func(size string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			resp, err := http.Get(lp.logURL + "/checkpoint")
			if err != nil {
				t.Fatal(err)
			}
			signed, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && bytes.Contains(signed, []byte(witnessName)) && strings.Split(string(signed), "\n")[1] == size {
				if got := checkCosigned(t, lp, signed); got != size {
					t.Fatalf("size %s, want %s", got, size)
				}
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("no cosigned checkpoint of size %s in time", size)
	}
	appendN(0, 10)
	lp.log.Notify()
	waitFor("10")
	appendN(10, 300) // the witness now needs a consistency proof 10 -> 310
	lp.log.Notify()
	waitFor("310")
}

func post(t *testing.T, url string, body []byte) (int, string, string) {
	t.Helper()
	resp, err := http.Post(url+"/add-checkpoint", "text/plain", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func TestWitnessRefusals(t *testing.T) {
	t.Parallel()
	lp, appendN := setup(t)
	ctx := context.Background()
	appendN(0, 20)
	if _, err := lp.log.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	lp.log.Witness(ctx)
	signed, err := lp.log.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkCosigned(t, lp, signed)
	logOnly, _, _ := bytes.Cut(signed, []byte("\u2014 "+witnessName))

	lskey, _, _ := tlog.KeyFromSeed(tlogtest.Origin, tlog.Ed25519, tlogtest.Seed("log"))
	logSigner, _ := note.NewSigner(lskey)
	sign := func(cp tlog.Checkpoint) []byte {
		b, err := note.Sign(&note.Note{Text: string(cp.Marshal())}, logSigner)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	latest, err := lp.log.LatestCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	forged := latest
	forged.Root[0] ^= 1
	bigger := latest
	bigger.Size = 30
	otherKey, _, _ := tlog.KeyFromSeed(tlogtest.Origin, tlog.Ed25519, tlogtest.Seed("not the log"))
	otherSigner, _ := note.NewSigner(otherKey)
	wrongSig, _ := note.Sign(&note.Note{Text: string(latest.Marshal())}, otherSigner)
	unknown, _ := note.Sign(&note.Note{Text: string(tlog.Checkpoint{Origin: "other.test/log", Size: 1}.Marshal())}, otherSigner)

	for _, c := range []struct {
		name   string
		body   []byte
		status int
		ctype  string
		text   string
	}{
		{"stale old size", append([]byte("old 0\n\n"), logOnly...), 409, "text/x.tlog.size", "20\n"},
		{"conflicting checkpoint for the same size", append([]byte("old 20\n\n"), sign(forged)...), 409, "", "different tree"},
		{"bad consistency proof", append([]byte("old 20\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n"), sign(bigger)...), 422, "", "consistency"},
		{"old above new", append([]byte("old 40\n\n"), sign(bigger)...), 400, "", "larger"},
		{"unknown log", append([]byte("old 0\n\n"), unknown...), 404, "", "unknown log"},
		{"not signed by the log", append([]byte("old 20\n\n"), wrongSig...), 403, "", "signature"},
		{"malformed old line", append([]byte("old 020\n\n"), logOnly...), 400, "", "line 1"},
		{"malformed proof line", append([]byte("old 20\nnot base64\n\n"), logOnly...), 400, "", "line 2"},
	} {
		status, ctype, text := post(t, lp.witURL, c.body)
		if status != c.status || (c.ctype != "" && ctype != c.ctype) || !strings.Contains(text, c.text) {
			t.Errorf("%s: %d %q %q, want %d %q containing %q", c.name, status, ctype, text, c.status, c.ctype, c.text)
		}
	}
	// Resubmitting the cosigned checkpoint is fine and still cosigned.
	if status, _, text := post(t, lp.witURL, append([]byte("old 20\n\n"), logOnly...)); status != 200 || !strings.HasPrefix(text, "\u2014 "+witnessName+" ") {
		t.Errorf("same checkpoint again: %d %q", status, text)
	}

	// The state survives a restart of the witness.
	wskey, _, _ := tlog.KeyFromSeed(witnessName, tlog.CosignatureEd25519, lp.witSeed)
	w2, err := witness.New(witness.Config{Key: wskey, Logs: []witness.Log{{Origin: tlogtest.Origin, VerifierKeys: []string{lp.logVKey}}}, StatePath: lp.statePath})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w2.AddCheckpoint(append([]byte("old 0\n\n"), logOnly...)); err == nil || !strings.Contains(err.Error(), "20") {
		t.Errorf("restarted witness forgot its state: %v", err)
	}
}
