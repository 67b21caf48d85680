package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/internal/tsatest"
	"github.com/acsledger/acsledger/verify"
)

// TestServeTimestamps runs serve --tsa against a real RFC 3161 authority
// (openssl ts) that is down at first: the log keeps anchoring, its
// checkpoints go out unstamped with the gap in /metrics, and once the
// authority is back they are stamped, served, and carried in a bundle that
// the acsverify binary checks with --tsa-cert --require-timestamp, and in
// the entry's receipt, whose time acsverify receipt prints.
func TestServeTimestamps(t *testing.T) { stores(t, testServeTimestamps) }

func testServeTimestamps(t *testing.T, db string) {
	a := tsatest.Start(t)
	a.SetDown(true)
	dir := t.TempDir()
	s := startIn(t, dir, nil, "serve", "--addr", "127.0.0.1:0", "--db", db, "--tsa", a.URL, "--tsa-cert", a.CACertFile)
	defer s.stop(t, syscall.SIGTERM)
	for i := range 3 {
		if code, out := post(t, s.url+"/api/v1/sessions/stamped/entries", entryJSON(i)); code != 201 {
			t.Fatalf("append: %d %v", code, out)
		}
	}
	waitFor(t, s, "a checkpoint of 3 leaves", func() (string, bool) {
		code, body := get(t, s.url+"/checkpoint")
		head, err := verify.ParseCheckpointHead(body)
		return fmt.Sprint(code, " ", err), code == 200 && err == nil && head.Size >= 3
	})
	_, body := get(t, s.url+"/checkpoint")
	head, _ := verify.ParseCheckpointHead(body)
	tsURL := fmt.Sprintf("%s/api/v1/checkpoints/%d/timestamp", s.url, head.Size)
	if code, _ := get(t, tsURL); code != 404 {
		t.Fatalf("time-stamp while the authority is down: %d, want 404", code)
	}
	waitFor(t, s, "the gap in /metrics", func() (string, bool) {
		_, m := get(t, s.url+"/metrics")
		return string(m), strings.Contains(string(m), "acsledger_tsa_unstamped_checkpoints{") && strings.Contains(string(m), "acsledger_tsa_unstamped_seconds{") &&
			strings.Contains(string(m), `acsledger_tsa_requests_total{acsledger_result="failed"`)
	})
	// save writes what the server answers at path to file.
	save := func(what, path, file string) {
		code, b := get(t, s.url+path)
		if code != 200 {
			t.Fatalf("%s: %d %s", what, code, b)
		}
		os.WriteFile(file, b, 0o600)
	}
	bundleFile := filepath.Join(t.TempDir(), "bundle.json")
	saveBundle := func() { save("bundle", "/api/v1/sessions/stamped/bundle", bundleFile) }
	saveBundle()
	if out, code := runAcsverify(t, "bundle", "--tsa-cert", a.CACertFile, "--require-timestamp", bundleFile); code != 1 || !strings.Contains(out, "timestamp_missing") {
		t.Fatalf("acsverify on the unstamped bundle: exit %d\n%s", code, out)
	}
	keys := defaultKeysDir(storeURL(db))
	if !filepath.IsAbs(keys) {
		keys = filepath.Join(dir, keys)
	}
	logKey, err := exec.Command(binary, "log-key", "--keys", keys).Output()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "log.vkey")
	os.WriteFile(keyFile, logKey, 0o600)
	receiptFile := filepath.Join(dir, "step.tlog-proof")
	saveReceipt := func() { save("receipt", "/api/v1/sessions/stamped/entries/0/receipt", receiptFile) }
	saveReceipt()
	if out, code := runAcsverify(t, "receipt", "--log-key", keyFile, "--tsa-cert", a.CACertFile, "--require-timestamp", receiptFile); code != 1 || !strings.Contains(out, "timestamp_missing") || strings.Contains(out, "time-stamped at") {
		t.Fatalf("acsverify on the unstamped receipt: exit %d\n%s", code, out)
	}

	a.SetDown(false)
	var resp []byte
	waitFor(t, s, "the checkpoint stamped after the authority came back", func() (string, bool) {
		code, b := get(t, tsURL)
		resp = b
		return fmt.Sprint(code), code == 200
	})
	_, cp := get(t, fmt.Sprintf("%s/api/v1/checkpoints/%d", s.url, head.Size))
	roots, _ := verify.ParseTSACerts(a.CACert)
	if _, err := verify.CheckTimestamp(resp, cp, roots); err != nil {
		t.Fatalf("served time-stamp: %v", err)
	}
	// Reads through the API are recorded in the access log, whose entries
	// the log takes in too, so a bundle may end at a checkpoint newer than
	// the last one stamped: export again until it ends at a stamped one.
	var out string
	var rep verify.ReportJSON
	waitFor(t, s, "a bundle ending at a stamped checkpoint", func() (string, bool) {
		saveBundle()
		out, _ = runAcsverify(t, "bundle", "--json", "--tsa-cert", a.CACertFile, "--require-timestamp", bundleFile)
		rep = verify.ReportJSON{}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("acsverify --json: %v\n%s", err, out)
		}
		return out, len(rep.Timestamps) > 0
	})
	// Entries appended through the API have no signed responses, so the
	// bundle's only findings are entry_without_response: none is about
	// time, and the checkpoint's stamp is reported.
	for _, f := range rep.Findings {
		if f.Code != verify.CodeEntryWithoutResponse {
			t.Errorf("acsverify on the stamped bundle: finding %s: %s", f.Code, f.Message)
		}
	}
	if len(rep.Timestamps) != 1 || rep.Timestamps[0].TreeSize < head.Size {
		t.Fatalf("acsverify reports time-stamps %+v, want the bundle checkpoint's (at least %d leaves)\n%s", rep.Timestamps, head.Size, out)
	}
	// The receipt of the first entry, asked for again, carries the token
	// of its checkpoint: acsverify prints the time, and the only finding
	// is entry_without_response (an API append has no signed response).
	saveReceipt()
	out, _ = runAcsverify(t, "receipt", "--log-key", keyFile, "--tsa-cert", a.CACertFile, "--require-timestamp", receiptFile)
	if strings.Contains(out, "timestamp_") || !regexp.MustCompile(`checkpoint \d+ time-stamped at 20\d\d-\d\d-\d\dT`).MatchString(out) {
		t.Fatalf("acsverify on the stamped receipt:\n%s", out)
	}
	// A mangled token: timestamp_invalid.
	mangled := mangleToken(t, receiptFile)
	if out, code := runAcsverify(t, "receipt", "--log-key", keyFile, "--tsa-cert", a.CACertFile, mangled); code != 1 || !strings.Contains(out, "timestamp_invalid") || strings.Contains(out, "time-stamped at") {
		t.Fatalf("acsverify on a receipt with a mangled token: exit %d\n%s", code, out)
	}
	_, m := get(t, s.url+"/metrics")
	if !strings.Contains(string(m), `acsledger_tsa_requests_total{acsledger_result="stamped"`) {
		t.Errorf("/metrics counts no stamped request:\n%s", grepLines(string(m), "acsledger_tsa"))
	}
}

// mangleToken writes a copy of the receipt whose time-stamp token has one
// byte changed, in the receipt's canonical form, and returns its path.
func mangleToken(t *testing.T, file string) string {
	t.Helper()
	doc, _ := os.ReadFile(file)
	r, err := verify.ParseReceipt(doc)
	if err != nil {
		t.Fatal(err)
	}
	var x verify.ReceiptExtra
	if err := json.Unmarshal(r.Extra, &x); err != nil || len(x.TimestampToken) < 100 {
		t.Fatalf("receipt extra data: %v, token of %d bytes", err, len(x.TimestampToken))
	}
	x.TimestampToken[len(x.TimestampToken)-10] ^= 0x01
	b, _ := json.Marshal(x)
	canon, err := acs.Canonicalize(b)
	if err != nil {
		t.Fatal(err)
	}
	out := file + ".mangled"
	os.WriteFile(out, verify.FormatReceipt(canon, r.Index, r.Proof, r.Checkpoint), 0o600)
	return out
}

// waitFor polls cond for up to 30 s, failing t with what it last saw.
func waitFor(t *testing.T, s *server, what string, cond func() (string, bool)) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		last, ok := cond()
		if ok {
			return last
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in 30s; last: %.2000s\nserver log:\n%s", what, last, s.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// runAcsverify runs the acsverify binary (built once beside acsledger).
func runAcsverify(t *testing.T, args ...string) (string, int) {
	t.Helper()
	bin := filepath.Join(filepath.Dir(binary), "acsverify")
	if _, err := os.Stat(bin); err != nil {
		if out, err := exec.Command("go", "build", "-o", bin, "../acsverify").CombinedOutput(); err != nil {
			t.Fatalf("couldn't build acsverify: %v\n%s", err, out)
		}
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}
