package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/acsledger/acsledger/internal/launch"
)

// TestIngestScript runs `acsledger ingest` as a binary (the one TestMain
// built) through the scripts in testdata/ingest, the command-line contract
// of docs/ingest.md. `exitcode N exec acsledger ...` requires exit status N.
func TestIngestScript(t *testing.T) {
	// The scripts verify exported bundles with the auditor's CLI.
	verifier := filepath.Join(filepath.Dir(binary), "acsverify")
	if out, err := exec.Command("go", "build", "-o", verifier, "../acsverify").CombinedOutput(); err != nil {
		t.Fatalf("couldn't build acsverify: %v\n%s", err, out)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "ingest"),
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", filepath.Dir(binary)+string(os.PathListSeparator)+env.Getenv("PATH"))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) < 3 || args[1] != "exec" {
					ts.Fatalf("usage: exitcode N exec command [args...]")
				}
				launch.ExitCode(ts, args[0], args[2], args[3:]...)
			},
		},
	})
}

// TestServeIngest: `acsledger serve` takes an OPA upload on its ingest
// route and its Merkle log anchors the new session; A2H pushes are refused
// unless a Hub key is configured (--a2h-hmac).
func TestServeIngest(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := startServer(t, "--db", dir, "--a2h-hmac", "hub=00112233445566778899aabbccddeeff")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`[{"decision_id":"s-1","path":"authz/allow","input":{"session_id":"served"},"result":true,"labels":{"id":"o"},"timestamp":"2026-12-01T10:00:00Z"}]`))
	zw.Close()
	req, _ := http.NewRequest(http.MethodPost, s.url+"/api/v1/ingest/opa/logs", &gz)
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var sum map[string]any
	json.NewDecoder(resp.Body).Decode(&sum)
	resp.Body.Close()
	if resp.StatusCode != 200 || sum["accepted"] != 1.0 {
		t.Fatalf("upload: %d %v", resp.StatusCode, sum)
	}
	// A push signed with no configured key is refused and quarantined.
	req, _ = http.NewRequest(http.MethodPost, s.url+"/api/v1/ingest/a2h", strings.NewReader(`{"a2h_version":"0.3","in_reply_to":"m","resolution_id":"r","agent":{"id":"a","run_id":"b"},"resolution":"answered","response":{"actor":"human:x","resolved_at":"2026-12-01T10:00:00Z"}}`))
	req.Header.Set("A2H-Signature", "t="+itoa(time.Now().Unix())+",jti=j,v1=AAAA")
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var q map[string]any
	json.NewDecoder(resp.Body).Decode(&q)
	resp.Body.Close()
	if resp.StatusCode != 401 || q["reason"] != "signature_mismatch" {
		t.Fatalf("push: %d %v", resp.StatusCode, q)
	}
	// The server's log anchors the ingested entry.
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _ := exec.Command(binary, "export", "--db", dir, "--session", "served", "--out", filepath.Join(t.TempDir(), "b.json")).CombinedOutput()
		if strings.Contains(string(out), "anchored through entry 0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not anchored: %s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.stop(t, syscall.SIGTERM)
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
