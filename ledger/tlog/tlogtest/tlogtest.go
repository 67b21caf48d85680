// Package tlogtest holds the fixed inputs of the Merkle log's tests: the
// origin, key seeds and stand-in entry hashes. It imports neither
// ledger/tlog nor a database driver, so the log's own tests can use it;
// internal/tlogdb appends entries with these hashes to real stores.
package tlogtest

import (
	"crypto/sha256"
	"fmt"
)

// Origin is the checkpoint origin of test logs.
const Origin = "acsledger.test/log"

// Seed returns a deterministic 32-byte key seed for label.
func Seed(label string) [32]byte {
	return sha256.Sum256([]byte("tlogtest key " + label))
}

// EntryHash is the stand-in entry_hash of the entry at pos of session.
func EntryHash(session string, pos int64) [32]byte {
	return sha256.Sum256(fmt.Appendf(nil, "%s/%d", session, pos))
}
