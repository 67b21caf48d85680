package keydir

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// TestOpen: a default key directory that does not exist, or one without
// key files, gets the default keys once; a given one must exist.
func TestOpen(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	dir := filepath.Join(t.TempDir(), "keys")
	kd, err := Open(dir, true, log)
	if err != nil {
		t.Fatal(err)
	}
	if got := kd.KeySet.KeyIDs(); len(got) != len(defaultKeys) {
		t.Fatalf("a first start made keys %v, want the %d defaults", got, len(defaultKeys))
	}
	before, err := os.ReadFile(filepath.Join(dir, "acsledger-hmac.key.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, false, log); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "acsledger-hmac.key.json")); string(after) != string(before) {
		t.Error("opening again replaced the keys")
	}
	if _, err := Open(filepath.Join(t.TempDir(), "typo"), false, log); err == nil {
		t.Error("a --keys directory that does not exist became a new key set")
	}
	empty := t.TempDir()
	if kd, err := Open(empty, false, log); err != nil || len(kd.KeySet.KeyIDs()) != len(defaultKeys) {
		t.Errorf("an empty --keys directory: %v", err)
	}
}

// TestCheckDir: a private key file others can read is refused, with the
// fix in the message; public keys may be readable.
func TestCheckDir(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(dir, false, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if err := CheckDir(dir); err != nil {
		t.Fatalf("fresh keys: %v", err)
	}
	if err := os.Chmod(filepath.Join(dir, "acsledger-ecdsa-p256.pub.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckDir(dir); err != nil {
		t.Errorf("a readable public key: %v", err)
	}
	priv := filepath.Join(dir, "acsledger-hmac.key.json")
	if err := os.Chmod(priv, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckDir(dir); !errors.Is(err, ErrExposed) {
		t.Errorf("a readable private key: %v", err)
	}
	if err := CheckPrivate(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("a missing file: %v", err)
	}
}
