package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/verify"
)

// TestLogKeyTrustFile checks that `log-key --trust-file` prints a trust
// file acsverify takes: the verifier key plain `log-key` prints and the
// public response keys of the key directory, never its HMAC secret.
func TestLogKeyTrustFile(t *testing.T) {
	t.Parallel()
	keys := filepath.Join(t.TempDir(), "keys")
	keygen(t, keys, "--log-origin", "test.example/log", "--alg", "ECDSA-P256,ML-DSA-65,HMAC-SHA256")
	plain, err := exec.Command(binary, "log-key", "--keys", keys).Output()
	if err != nil {
		t.Fatalf("log-key: %v", err)
	}
	vkey := strings.Split(strings.TrimSpace(string(plain)), "\n")[1]
	out, err := exec.Command(binary, "log-key", "--keys", keys, "--trust-file").Output()
	if err != nil {
		t.Fatalf("log-key --trust-file: %v", err)
	}
	var tf verify.BundleKeys
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tf); err != nil {
		t.Fatalf("log-key --trust-file printed no trust file: %v\n%s", err, out)
	}
	if !slices.Equal(tf.LogKeys, []string{vkey}) {
		t.Errorf("log_keys = %q, want %q", tf.LogKeys, vkey)
	}
	var algs []string
	for _, raw := range tf.ResponseKeys {
		k, err := sig.ParsePublicKey(raw)
		if err != nil {
			t.Fatalf("response key %s: %v", raw, err)
		}
		algs = append(algs, string(k.Algorithm()))
	}
	slices.Sort(algs)
	if want := []string{"ECDSA-P256", "ML-DSA-65"}; !slices.Equal(algs, want) {
		t.Errorf("response_keys are %v, want %v", algs, want)
	}
	// The HMAC secret stays in the key directory.
	kd, err := sig.LoadKeyDir(keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kd.Private {
		if k.Algorithm() != sig.HMACSHA256 {
			continue
		}
		b, err := os.ReadFile(filepath.Join(keys, k.KeyID()+".key.json"))
		if err != nil {
			t.Fatal(err)
		}
		var f struct{ Private string }
		if err := json.Unmarshal(b, &f); err != nil || f.Private == "" {
			t.Fatalf("%s: no private member: %v", k.KeyID(), err)
		}
		if bytes.Contains(out, []byte(f.Private)) || bytes.Contains(out, []byte(k.KeyID())) {
			t.Errorf("the trust file names the HMAC key %s", k.KeyID())
		}
	}
	if _, err := verify.ParseTrust(out); err != nil {
		t.Errorf("verify.ParseTrust: %v", err)
	}
}
