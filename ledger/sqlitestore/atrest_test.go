package sqlitestore_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/paramcrypt"
	"github.com/acsledger/acsledger/ledger/sqlitestore"
	"github.com/acsledger/acsledger/ledger/storeopen"
	"github.com/acsledger/acsledger/ledger/storetest"
)

// secretParams are params holding a secret, as MODIFY redacts them.
func secretParams(i int) []byte {
	return fmt.Appendf(nil, `{"arguments":{"token":"sk-live-SECRET-%d"}}`, i)
}

// TestParamsEncryptedAtRest: the database files (after a checkpoint, and
// the WAL before it) never hold the params in clear; params moved to
// another step do not decrypt; an erased step's record, data key
// included, is gone from the file; every file of the store is its
// owner's only.
func TestParamsEncryptedAtRest(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	sealer, err := paramcrypt.New(storetest.TestMasterKey)
	if err != nil {
		t.Fatal(err)
	}
	st, err := storeopen.Open(ctx, "sqlite:"+dir, ledger.Options{Params: sealer})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	storetest.SeedSession(t, storetest.Roles{Store: st, StepRecorder: st, StepReader: st, ParamsEraser: st, PolicyBundleStore: st}, 3, secretParams)
	path := filepath.Join(dir, storeopen.SQLiteFile)
	noSecretInFiles := func(when string) {
		t.Helper()
		for _, p := range []string{path, path + "-wal"} {
			b, err := os.ReadFile(p)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte("sk-live-SECRET")) {
				t.Errorf("%s: %s holds the params in clear", when, filepath.Base(p))
			}
		}
	}
	noSecretInFiles("before a checkpoint")

	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	noSecretInFiles("after a checkpoint")
	for i := range 3 {
		if got, err := st.Request(ctx, "s", int64(i)); err != nil || !bytes.Equal(got, secretParams(i)) {
			t.Fatalf("Request %d: %q, %v", i, got, err)
		}
	}

	// Whoever holds the file swaps the records of steps 0 and 1.
	if _, err := raw.Exec(`DROP TRIGGER request_params_no_update`); err != nil {
		t.Fatal(err)
	}
	var rec [2][]byte
	for pos := range rec {
		if err := raw.QueryRow(`SELECT params FROM request_params WHERE session_id = 's' AND position = ?`, pos).Scan(&rec[pos]); err != nil {
			t.Fatal(err)
		}
	}
	for pos := range rec {
		if _, err := raw.Exec(`UPDATE request_params SET params = ? WHERE session_id = 's' AND position = ?`, rec[1-pos], pos); err != nil {
			t.Fatal(err)
		}
	}
	for _, pos := range []int64{0, 1} {
		if got, err := st.Request(ctx, "s", pos); !errors.Is(err, paramcrypt.ErrOpen) || got != nil {
			t.Errorf("swapped record at %d: %q, %v; want ErrOpen", pos, got, err)
		}
	}

	var sealed []byte
	if err := raw.QueryRow(`SELECT params FROM request_params WHERE session_id = 's' AND position = 2`).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if _, err := st.EraseParams(ctx, "s", 2, "retention over", "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := raw.QueryRow(`SELECT count(*) FROM request_params WHERE session_id = 's' AND position = 2`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("erased record still stored: %d, %v", n, err)
	}
	// The record carried its own wrapped data key: with the row gone, no
	// key opens a copy of it; the copy itself still opens only for its step.
	if got, err := sealer.Open("s", 2, sealed); err != nil || !bytes.Equal(got, secretParams(2)) {
		t.Fatalf("the copy taken before the erasure: %q, %v", got, err)
	}
	if b, _ := os.ReadFile(path); bytes.Contains(b, sealed[6:60]) {
		t.Error("the erased record's wrapped data key is still in the database file")
	}

	for _, p := range []string{dir, path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) && p != dir && p != path {
			continue
		}
		want := os.FileMode(0o600)
		if p == dir {
			want = 0o700
		}
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", filepath.Base(p), fi.Mode().Perm(), err, want)
		}
	}
}

// TestFileModesTightened: a store created 0644 by an earlier version is
// made its owner's only when opened.
func TestFileModesTightened(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	for _, p := range []string{path, path + "-wal"} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := sqlitestore.Open(ctx, path, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want 0600", filepath.Base(p), fi.Mode().Perm(), err)
		}
	}
}
