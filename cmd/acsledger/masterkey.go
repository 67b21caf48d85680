package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/acsledger/acsledger/ledger/paramcrypt"
)

// The master key that wraps the data keys of request params at rest
// (ledger/paramcrypt): a file of 64 hex digits.
const (
	masterKeyFile = "params-master.key"
	envMasterKey  = "ACSLEDGER_MASTER_KEY"
)

// paramsSealer returns the sealer of request params, with the master key
// from, in order: --master-key-file (file), $ACSLEDGER_MASTER_KEY, or
// params-master.key in the key directory. create makes the last one, 0600,
// when it does not exist (a command that writes params); otherwise a
// missing key is nil: params stored in clear read, sealed ones are an
// error naming the missing key.
func paramsSealer(file, keysDir string, create bool, log *slog.Logger) (*paramcrypt.Sealer, error) {
	var key []byte
	var err error
	switch {
	case file != "":
		key, err = readMasterKey(file)
	case os.Getenv(envMasterKey) != "":
		key, err = paramcrypt.ParseKey(os.Getenv(envMasterKey))
		if err != nil {
			err = fmt.Errorf("$%s: %w", envMasterKey, err)
		}
	default:
		path := filepath.Join(keysDir, masterKeyFile)
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
