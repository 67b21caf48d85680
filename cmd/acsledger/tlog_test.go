package main

import (
	"bytes"
	"encoding/base64"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/verify"
)

// TestServeAnchorsAndWitnesses runs the whole anchoring loop with binaries
// only: serve makes its log key, `acsledger witness` follows that log, serve
// submits every checkpoint to it, and the checkpoint and an entry's
// inclusion proof check out with verifiers that are not the log's code.
func TestServeAnchorsAndWitnesses(t *testing.T) { stores(t, testAnchorsAndWitnesses) }

func testAnchorsAndWitnesses(t *testing.T, db string) {
	keys := filepath.Join(t.TempDir(), "keys")
	keygen(t, keys, "--log-origin", "test.example/log")
	s := startServer(t, "--db", db, "--keys", keys, "--log-origin", "test.example/log")
	s.stop(t, syscall.SIGTERM)

	out, err := exec.Command(binary, "log-key", "--keys", keys).CombinedOutput()
	if err != nil {
		t.Fatalf("log-key: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || lines[0] != "origin: test.example/log" || !strings.HasPrefix(lines[1], "test.example/log+") {
		t.Fatalf("log-key printed %q", out)
	}
	logVKey := lines[1]

	wdir := t.TempDir()
	w := startProcess(t, "witness", "--addr", "127.0.0.1:0", "--key", filepath.Join(wdir, "witness.key"),
		"--state", filepath.Join(wdir, "state.json"), "--log-origin", "test.example/log", "--log-key", logVKey)
	m := regexp.MustCompile(`verifier_key=(\S+)`).FindStringSubmatch(w.log())
	if m == nil {
		t.Fatalf("witness logged no verifier key:\n%s", w.log())
	}
	witnessVKey := m[1]

	s = startServer(t, "--db", db, "--keys", keys, "--witness", w.url+"="+witnessVKey)
	var heads []string
	for i := range 5 {
		code, out := post(t, s.url+"/api/v1/sessions/anchored/entries", entryJSON(i))
		if code != 201 {
			t.Fatalf("append: %d %v", code, out)
		}
		heads = append(heads, out["entry_hash"].(string))
	}

	// Wait for a cosigned checkpoint that covers the five entries.
	policy := &verify.CheckpointPolicy{LogKeys: []string{logVKey}, Witnesses: []string{witnessVKey}, WitnessQuorum: 1}
	var cp verify.Checkpoint
	var signed []byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := get(t, s.url+"/checkpoint")
		if code == 200 {
			c, findings, err := verify.VerifyCheckpoint(body, policy, "checkpoint")
			if err != nil {
				t.Fatalf("checkpoint: %v\n%s", err, body)
			}
			if c.Size >= 5 && len(findings) == 0 {
				cp, signed = c, body
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no cosigned checkpoint of 5 leaves in 30s; last: %d %s\nserver log:\n%s\nwitness log:\n%s", code, body, s.log(), w.log())
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The log's own signature, checked by golang.org/x/mod/sumdb/note.
	v, err := note.NewVerifier(logVKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open(signed, note.VerifierList(v)); err != nil {
		t.Fatalf("sumdb/note refuses the checkpoint: %v\n%s", err, signed)
	}

	// The inclusion proof of the session head, against that checkpoint.
	code, proof := get(t, s.url+"/api/v1/proofs/entry/anchored/4")
	if code != 200 {
		t.Fatalf("proof: %d %s", code, proof)
	}
	index, path, proofCP := parseTlogProof(t, proof)
	pc, _, err := verify.VerifyCheckpoint(proofCP, policy, "proof checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	head, err := acs.ParseHash(heads[4])
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := verify.LeafHash("anchored", 4, head)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.VerifyInclusion(leaf, index, pc.Size, path, pc.Root); err != nil {
		t.Fatalf("inclusion proof of the head does not verify: %v\n%s", err, proof)
	}
	// The same proof must not vouch for another entry_hash.
	other, _ := acs.ParseHash(heads[3])
	if bad, _ := verify.LeafHash("anchored", 4, other); verify.VerifyInclusion(bad, index, pc.Size, path, pc.Root) == nil {
		t.Fatal("inclusion proof verified for the wrong entry_hash")
	}
	t.Logf("checkpoint of %d leaves, cosigned; head at leaf %d proven", cp.Size, index)
	s.stop(t, syscall.SIGTERM)
	w.stop(t, syscall.SIGTERM)
}

// parseTlogProof reads a c2sp.org/tlog-proof@v1 document.
func parseTlogProof(t *testing.T, doc []byte) (index uint64, path [][]byte, checkpoint []byte) {
	t.Helper()
	head, cp, ok := bytes.Cut(doc, []byte("\n\n"))
	if !ok {
		t.Fatalf("tlog-proof without a blank line:\n%s", doc)
	}
	lines := strings.Split(string(head), "\n")
	if lines[0] != "c2sp.org/tlog-proof@v1" || !strings.HasPrefix(lines[1], "index ") {
		t.Fatalf("tlog-proof header: %q", lines[:2])
	}
	index, err := strconv.ParseUint(strings.TrimPrefix(lines[1], "index "), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines[2:] {
		h, err := base64.StdEncoding.DecodeString(l)
		if err != nil || len(h) != 32 {
			t.Fatalf("proof hash %q: %v", l, err)
		}
		path = append(path, h)
	}
	return index, path, cp
}
