package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/paramcrypt"
	"github.com/acsledger/acsledger/ledger/pgstore"
	"github.com/acsledger/acsledger/ledger/storetest"
)

// TestParamsEncryptedAtRest: what request_params holds is sealed, never
// the params; a superuser who swaps two steps' records gets neither step's
// params back; an erased step's record, with its data key, is gone.
func TestParamsEncryptedAtRest(t *testing.T) {
	ctx := context.Background()
	url := newDB(t)
	sealer, err := paramcrypt.New(storetest.TestMasterKey)
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t, url, pgstore.Options{Options: ledger.Options{Params: sealer}})
	params := func(i int) []byte { return fmt.Appendf(nil, `{"arguments":{"token":"sk-live-SECRET-%d"}}`, i) }
	storetest.SeedSession(t, roles(s), 3, params)
	su := connectAs(t, url, "")
	var rec [3][]byte
	for i := range rec {
		if err := su.QueryRow(ctx, `SELECT params FROM request_params WHERE session_id = 's' AND position = $1`, i).Scan(&rec[i]); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(rec[i], []byte("sk-live-SECRET")) || !paramcrypt.Sealed(rec[i]) {
			t.Fatalf("request_params holds %q for step %d: want it sealed", rec[i], i)
		}
		if got, err := s.Request(ctx, "s", int64(i)); err != nil || !bytes.Equal(got, params(i)) {
			t.Fatalf("Request %d: %q, %v", i, got, err)
		}
	}

	tx, err := su.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
		t.Fatal(err)
	}
	for pos := range 2 {
		if _, err := tx.Exec(ctx, `UPDATE request_params SET params = $1 WHERE session_id = 's' AND position = $2`, rec[1-pos], pos); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for pos := range 2 {
		if got, err := s.Request(ctx, "s", int64(pos)); !errors.Is(err, paramcrypt.ErrOpen) || got != nil {
			t.Errorf("swapped record at %d: %q, %v; want ErrOpen", pos, got, err)
		}
	}

	if _, err := s.EraseParams(ctx, "s", 2, "retention over", "test"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := su.QueryRow(ctx, `SELECT count(*) FROM request_params WHERE params = $1`, rec[2]).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the erased record is still stored: %d, %v", n, err)
	}

	// A store without the master key cannot read what is sealed.
	plain := openStore(t, url, pgstore.Options{})
	if got, err := plain.Request(ctx, "s", 0); err == nil || got != nil {
		t.Errorf("without the master key: %q, %v; want an error", got, err)
	}
}
