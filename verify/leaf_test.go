package verify_test

import (
	"crypto/sha256"
	"testing"

	"github.com/acsledger/acsledger/acs"
	ltlog "github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/verify"
)

// TestLeafHashMatchesLog checks verify's leaf encoding, written from the
// definition through encoding/json and acs.Canonicalize, against the
// Merkle log's own hand-written encoder: both must give the same leaf
// hash, session ids with characters JCS escapes included.
func TestLeafHashMatchesLog(t *testing.T) {
	t.Parallel()
	sessions := []string{
		"sess-7f3c9a52-1e4b-4d8a-9c61-0b2e5d7a8f14",
		"a",
		"quote\" backslash\\ slash/ tab\t nl\n cr\r bell\x07 del\x7f",
		"<html> & ünïcødé \u2028 \U0001F600",
	}
	positions := []int64{0, 1, 9, 1 << 20, 1<<53 - 1}
	for _, s := range sessions {
		for _, p := range positions {
			eh := acs.Hash(sha256.Sum256([]byte(s)))
			eh[0] ^= byte(p)
			b, err := ltlog.Leaf{SessionID: s, Position: p, EntryHash: eh}.MarshalJCS()
			if err != nil {
				t.Fatalf("%q %d: MarshalJCS: %v", s, p, err)
			}
			want := sha256.Sum256(append([]byte{0}, b...))
			got, err := verify.LeafHash(s, uint64(p), eh)
			if err != nil {
				t.Fatalf("%q %d: LeafHash: %v", s, p, err)
			}
			if got != acs.Hash(want) {
				t.Errorf("session %q position %d: verify.LeafHash = %s, log leaf %s hashes to %x", s, p, got, b, want)
			}
		}
	}
}
