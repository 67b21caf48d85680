// Package keydir is the files a server keeps beside its store: the key
// directory (the Guardian's signing keys, the master key of request params
// at rest) and the first admin token, where they are by default, how a
// first start makes them, and the rule that no one but their owner may
// read a secret (mode 0600).
package keydir

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/ledger/paramcrypt"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

// Default is where keys live when --keys is not given: keys/ in an
// embedded store's directory, else ./acsledger-keys.
func Default(storeURL string) string {
	t, err := storeopen.Parse(storeURL)
	if err == nil && t.Dir != "" {
		return filepath.Join(t.Dir, "keys")
	}
	return "acsledger-keys"
}

// AdminTokenFile is where serve saves its first admin token by default:
// admin-token in an embedded store's directory, else
// ./acsledger-admin-token.
func AdminTokenFile(storeURL string) string {
	if t, err := storeopen.Parse(storeURL); err == nil && t.Dir != "" {
		return filepath.Join(t.Dir, "admin-token")
	}
	return "acsledger-admin-token"
}

// defaultKeys are what a first start generates: an asymmetric response key
// and an HMAC input key for clients that use the §10 baseline.
var defaultKeys = []struct {
	alg sig.Algorithm
	id  string
}{
	{sig.ECDSAP256, "acsledger-ecdsa-p256"},
	{sig.HMACSHA256, "acsledger-hmac"},
}

// Open reads the Guardian's keys in dir. dir, if given (not isDefault),
// must exist: a mistyped path is an error, not a new key set. A
// directory without any key file (a first start, a fresh volume) gets
// fresh default keys; a default one that does not exist is created.
func Open(dir string, isDefault bool, log *slog.Logger) (*sig.KeyDir, error) {
	none, err := noKeyFiles(dir)
	var generate bool
	if isDefault {
		generate = errors.Is(err, fs.ErrNotExist) || err == nil && none
	} else if err != nil {
		return nil, fmt.Errorf("couldn't read key directory %s: %w", dir, err)
	} else {
		generate = none
	}
	if generate {
		var keys []*sig.PrivateKey
		for _, k := range defaultKeys {
			pk, err := sig.GenerateKey(k.alg, k.id)
			if err != nil {
				return nil, err
			}
			keys = append(keys, pk)
		}
		if err := sig.WriteKeyDir(dir, keys...); err != nil {
			return nil, fmt.Errorf("couldn't create keys in %s: %w", dir, err)
		}
		log.Info("generated Guardian keys", "dir", dir)
	}
	kd, err := sig.LoadKeyDir(dir)
	if err != nil {
		return nil, fmt.Errorf("couldn't load keys from %s: %w", dir, err)
	}
	return kd, nil
}

// noKeyFiles reports whether dir, which must exist, holds no Guardian key
// files (*.key.json, *.pub.json); other files, such as the Merkle log's
// key, do not count.
func noKeyFiles(dir string) (bool, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, ".key.json") || strings.HasSuffix(n, ".pub.json") {
			return false, nil
		}
	}
	return true, nil
}

// PublicKeys loads the public halves of the keys in dir, if it exists.
// HMAC keys are left to the bundle builder, which never carries them.
func PublicKeys(dir string) ([]*sig.PublicKey, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	kd, err := sig.LoadKeyDir(dir)
	if err != nil {
		return nil, fmt.Errorf("couldn't load keys from %s: %w", dir, err)
	}
	var out []*sig.PublicKey
	for _, id := range kd.KeySet.KeyIDs() {
		k, _ := kd.KeySet.Get(id)
		out = append(out, k)
	}
	return out, nil
}

// ErrExposed reports a secret file that group or others can read.
var ErrExposed = errors.New("readable by group or others")

// CheckPrivate refuses a secret file whose mode lets anyone but its owner
// read it, saying how to fix it. A missing file passes.
func CheckPrivate(path string) error {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("couldn't check %s: %w", path, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s is %w (mode %04o): it holds a secret; run: chmod 600 %s", path, ErrExposed, st.Mode().Perm(), path)
	}
	return nil
}

// CheckDir refuses private key files in dir that group or others can
// read: the Guardian's *.key.json and the log's *.note.key. Public keys
// (*.pub.json) may be readable.
func CheckDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("couldn't read key directory %s: %w", dir, err)
	}
	var errs []error
	for _, e := range ents {
		n := e.Name()
		if e.Type().IsRegular() && (strings.HasSuffix(n, ".key.json") || strings.HasSuffix(n, ".key")) {
			errs = append(errs, CheckPrivate(filepath.Join(dir, n)))
		}
	}
	return errors.Join(errs...)
}

// WriteSecret replaces path with content, mode 0600 from the start.
func WriteSecret(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".admin-token-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(content); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// The master key that wraps the data keys of request params at rest
// (ledger/paramcrypt): a file of 64 hex digits.
const (
	MasterKeyFile = "params-master.key"
	EnvMasterKey  = "ACSLEDGER_MASTER_KEY"
)

// ParamsSealer returns the sealer of request params, with the master key
// from, in order: --master-key-file (file), $ACSLEDGER_MASTER_KEY, or
// params-master.key in the key directory. create makes the last one, 0600,
// when it does not exist (a command that writes params); otherwise a
// missing key is nil: params stored in clear read, sealed ones are an
// error naming the missing key.
func ParamsSealer(file, keysDir string, create bool, log *slog.Logger) (*paramcrypt.Sealer, error) {
	var key []byte
	var err error
	switch {
	case file != "":
		key, err = readMasterKey(file)
	case os.Getenv(EnvMasterKey) != "":
		key, err = paramcrypt.ParseKey(os.Getenv(EnvMasterKey))
		if err != nil {
			err = fmt.Errorf("$%s: %w", EnvMasterKey, err)
		}
	default:
		path := filepath.Join(keysDir, MasterKeyFile)
		key, err = readMasterKey(path)
		if errors.Is(err, fs.ErrNotExist) {
			if !create {
				return nil, nil
			}
			if err := os.MkdirAll(keysDir, 0o700); err != nil {
				return nil, fmt.Errorf("couldn't create key directory %s: %w", keysDir, err)
			}
			if key, err = paramcrypt.GenerateKeyFile(path); err == nil {
				log.Info("generated the master key of request params at rest", "file", path)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	return paramcrypt.New(key)
}

func readMasterKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("couldn't read the master key: %w", err)
	}
	k, err := paramcrypt.ParseKey(string(b))
	if err != nil {
		return nil, fmt.Errorf("master key file %s: %w", path, err)
	}
	return k, nil
}
