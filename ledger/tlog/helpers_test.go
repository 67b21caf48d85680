package tlog

import (
	"fmt"
	"testing"

	"github.com/acsledger/acsledger/ledger/tlog/tlogtest"
)

const testOrigin = tlogtest.Origin

// testKeys are deterministic log keys: Ed25519 and ML-DSA-44.
func testKeys(t testing.TB) (skeys, vkeys []string) {
	t.Helper()
	for i, alg := range []Algorithm{Ed25519, CosignatureMLDSA44} {
		s, v, err := KeyFromSeed(testOrigin, alg, tlogtest.Seed(fmt.Sprint("log ", i)))
		if err != nil {
			t.Fatal(err)
		}
		skeys, vkeys = append(skeys, s), append(vkeys, v)
	}
	return skeys, vkeys
}

func entryHash(session string, pos int64) [32]byte { return tlogtest.EntryHash(session, pos) }
