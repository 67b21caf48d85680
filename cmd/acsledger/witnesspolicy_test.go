package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/acsledger/acsledger/verify"
)

// TestServeWitnessPolicy runs serve --witness-policy needing both of two
// `acsledger witness` processes. While the second is down the log keeps
// integrating and signing but /checkpoint stays at the last checkpoint
// both cosigned; when it comes back on its address, publication catches
// up. Both stores.
func TestServeWitnessPolicy(t *testing.T) { stores(t, testServeWitnessPolicy) }

func testServeWitnessPolicy(t *testing.T, db string) {
	const origin = "policy.example/log"
	keys := filepath.Join(t.TempDir(), "keys")
	keygen(t, keys, "--log-origin", origin)
	out, err := execOut(binary, "log-key", "--keys", keys)
	if err != nil {
		t.Fatalf("log-key: %v\n%s", err, out)
	}
	logVKey := strings.Split(strings.TrimSpace(out), "\n")[1]

	wdir := t.TempDir()
	startWitness := func(i int, addr string) *server {
		return startProcess(t, "witness", "--addr", addr, "--name", fmt.Sprintf("w%d.example", i),
			"--key", filepath.Join(wdir, fmt.Sprintf("w%d.key", i)), "--state", filepath.Join(wdir, fmt.Sprintf("w%d.json", i)),
			"--log-origin", origin, "--log-key", logVKey)
	}
	vkeyOf := func(w *server) string {
		m := regexp.MustCompile(`verifier_key=(\S+)`).FindStringSubmatch(w.log())
		if m == nil {
			t.Fatalf("witness logged no verifier key:\n%s", w.log())
		}
		return m[1]
	}
	w1 := startWitness(1, "127.0.0.1:0")
	defer w1.stop(t, syscall.SIGTERM)
	// The second witness's address is fixed so that it can come back on it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr2 := ln.Addr().String()
	ln.Close()
	w2 := startWitness(2, addr2)
	v1, v2 := vkeyOf(w1), vkeyOf(w2)
	policyFile := filepath.Join(t.TempDir(), "policy")
	os.WriteFile(policyFile, fmt.Appendf(nil, "log %s\nwitness one %s %s\nwitness two %s %s\ngroup both all one two\nquorum both\n", logVKey, v1, w1.url, v2, w2.url), 0o600)
	// A policy that does not parse stops serve with the line and field.
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("witness one nothex\nquorum one\n"), 0o600)
	if out, err := execOut(binary, "serve", "--db", t.TempDir(), "--keys", keys, "--addr", "127.0.0.1:0", "--witness-policy", bad); err == nil || !strings.Contains(out, "line 1, field 3") {
		t.Fatalf("serve with a bad policy: %v\n%s", err, out)
	}

	s := startServer(t, "--db", db, "--keys", keys, "--witness-policy", policyFile)
	defer func() { s.stop(t, syscall.SIGTERM) }() // whichever serve runs last
	policy := &verify.CheckpointPolicy{LogKeys: []string{logVKey}, Witnesses: []string{v1, v2}, WitnessQuorum: 2}
	appendN := func(from, n int) {
		for i := from; i < from+n; i++ {
			if code, out := post(t, s.url+"/api/v1/sessions/held/entries", entryJSON(i)); code != 201 {
				t.Fatalf("append: %d %v", code, out)
			}
		}
	}
	published := func(atLeast uint64) uint64 {
		var size uint64
		waitFor(t, s, fmt.Sprintf("a checkpoint of at least %d leaves cosigned by both", atLeast), func() (string, bool) {
			code, body := get(t, s.url+"/checkpoint")
			if code != 200 {
				return fmt.Sprint(code, string(body)), false
			}
			cp, fs, err := verify.VerifyCheckpoint(body, policy, "checkpoint")
			if err != nil || len(fs) != 0 {
				t.Fatalf("served checkpoint does not satisfy the policy: %v %v\n%s", err, fs, body)
			}
			size = cp.Size
			return string(body), cp.Size >= atLeast
		})
		return size
	}
	appendN(0, 3)
	first := published(3)

	w2.stop(t, syscall.SIGTERM)
	appendN(3, 3)
	// The log signs the new entries' checkpoints, but publishes none.
	waitFor(t, s, "the signed tree ahead of the published one", func() (string, bool) {
		_, b := get(t, s.url+"/api/v1/stats")
		return string(b), strings.Contains(string(b), `"witness_policy":true`) && strings.Contains(string(b), fmt.Sprintf(`"published":%d`, first)) && !strings.Contains(string(b), fmt.Sprintf(`"signed":%d`, first))
	})
	if code, body := get(t, s.url+"/checkpoint"); code != 200 || !strings.Contains(string(body), fmt.Sprintf("\n%d\n", first)) {
		t.Fatalf("checkpoint while a witness is down: %d\n%s", code, body)
	}
	_, m := get(t, s.url+"/metrics")
	if !regexp.MustCompile(fmt.Sprintf(`(?m)^acsledger_tlog_published_tree_size\{[^}]*\} %d$`, first)).MatchString(string(m)) || !strings.Contains(string(m), "acsledger_tlog_integrated_tree_size{") {
		t.Errorf("/metrics lacks the publication gauges:\n%s", grepLines(string(m), "acsledger_tlog_"))
	}

	// Offline export with the policy anchors in the published checkpoint,
	// not the newer signed one (serve is stopped: the embedded store has
	// one writer at a time).
	s.stop(t, syscall.SIGTERM)
	bundle := filepath.Join(t.TempDir(), "bundle.json")
	if out, err := execOut(binary, "export", "--db", db, "--keys", keys, "--session", "held", "--witness-policy", policyFile, "--out", bundle); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	} else if !strings.Contains(out, fmt.Sprintf("checkpoint of size %d", first)) {
		t.Fatalf("export did not anchor in the published checkpoint %d:\n%s", first, out)
	}

	// After a restart of serve, publication resumes once the witness is back.
	s = startServer(t, "--db", db, "--keys", keys, "--witness-policy", policyFile)
	w2 = startWitness(2, addr2)
	defer w2.stop(t, syscall.SIGTERM)
	published(first + 3)
}

// execOut runs a command and returns its combined output.
func execOut(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}
