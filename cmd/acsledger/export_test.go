package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/verify"
)

// keyDir writes the fixture's Guardian key, and logKey (if not "") as the
// log key, into a key directory laid out as serve keeps it.
func keyDir(t *testing.T, f *evidencetest.Fixture, logKey string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "keys")
	if err := sig.WriteKeyDir(dir, f.ECDSA); err != nil {
		t.Fatal(err)
	}
	if logKey != "" {
		if err := os.WriteFile(filepath.Join(dir, logKeyFile), []byte(logKey+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestExport(t *testing.T) {
	storeKinds(t, func(t *testing.T, kind string) {
		f := evidencetest.New(t, kind)
		keysDir := keyDir(t, f, f.LogKey)
		out := filepath.Join(t.TempDir(), "bundle.json")
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"export", "--session", f.ECDSASession, "--db", f.URL, "--keys", keysDir, "--include-policies", "--out", out}, &stdout, &stderr)
		if code != 0 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "2 entries, 2 signed responses, anchored through entry 1 in the checkpoint of size 6") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		// An auditor with only the log key: the response key comes
		// from the bundle, as --keys put it there.
		trust := &verify.Trust{Checkpoint: verify.CheckpointPolicy{LogKeys: []string{f.LogVerifier}}}
		rep, err := verify.VerifyBundle(bytes.NewReader(b), trust)
		if err != nil || !rep.Verified() || rep.Entries != 2 {
			t.Fatalf("exported bundle: %v %+v", err, rep)
		}
		if !bytes.Contains(b, []byte(`"content":"`)) || !bytes.Contains(b, []byte(`"key_id":"guardian-ecdsa"`)) {
			t.Error("the bundle lacks the policy content or the response key")
		}
	})
}

func TestExportWithoutLogAndErrors(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	keysDir := keyDir(t, f, "")
	badLog := keyDir(t, f, "PRIVATE+KEY+not+a+key")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"export", "--session", f.HMACSession, "--db", f.URL, "--keys", keysDir}, &stdout, &stderr)
	if code != 0 || !strings.Contains(stderr.String(), "NOT anchored: no Merkle log key in "+keysDir) {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	rep, err := verify.VerifyBundle(bytes.NewReader(stdout.Bytes()), f.Trust(t))
	if err != nil || rep.Verified() || len(rep.Findings) != 1 || rep.Findings[0].Code != verify.CodeNotAnchored {
		t.Errorf("bundle on stdout without a log: %v %+v", err, rep)
	}

	out := filepath.Join(t.TempDir(), "bundle.json")
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no session", []string{"export", "--db", f.URL}, 2, "--session is required"},
		{"unknown session", []string{"export", "--db", f.URL, "--session", "nope", "--out", out}, 1, "couldn't load session nope"},
		{"bad log key", []string{"export", "--db", f.URL, "--session", f.HMACSession, "--keys", badLog}, 1, "couldn't open the Merkle log with the keys in " + badLog},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), c.args, &stdout, &stderr); code != c.code || !strings.Contains(stderr.String(), c.want) {
				t.Errorf("exit %d, stderr %q; want %d naming %q", code, stderr.String(), c.code, c.want)
			}
		})
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed export left %s: %v", out, err)
	}
}
