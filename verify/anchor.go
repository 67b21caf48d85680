package verify

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/acsledger/acsledger/acs"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// LeafHash returns the RFC 6962 leaf hash under which the acsledger Merkle
// log commits to one ContextEntry: SHA-256(0x00 || leaf), where leaf is the
// RFC 8785 form of
//
//	{"v":1,"session_id":<session id>,"position":<0-based position in the session's chain>,"entry_hash":<lowercase hex>}
//
// (docs/merkle-log.md). It is written here from the definition, apart from
// the log's own encoder, so that the two check each other.
func LeafHash(sessionID string, position uint64, entryHash acs.Hash) (acs.Hash, error) {
	b, err := json.Marshal(struct {
		V         int    `json:"v"`
		SessionID string `json:"session_id"`
		Position  uint64 `json:"position"`
		EntryHash string `json:"entry_hash"`
	}{1, sessionID, position, entryHash.String()})
	if err != nil {
		return acs.Hash{}, err
	}
	leaf, err := acs.Canonicalize(b)
	if err != nil {
		return acs.Hash{}, fmt.Errorf("leaf: %w", err)
	}
	h := sha256.New()
	h.Write([]byte{0})
	h.Write(leaf)
	return acs.Hash(h.Sum(nil)), nil
}

// VerifyInclusion checks an RFC 6962 inclusion proof (audit path, leaf to
// root) for the leaf hash at index in a tree of size leaves with root.
func VerifyInclusion(leafHash acs.Hash, index, size uint64, path [][]byte, root [32]byte) error {
	got, err := proof.RootFromInclusionProof(rfc6962.DefaultHasher, index, size, leafHash[:], path)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, root[:]) {
		return fmt.Errorf("the proof leads to root %x, not the checkpoint's %x", got, root)
	}
	return nil
}

// VerifyConsistency checks an RFC 6962 consistency proof between a tree of
// size1 leaves with root1 and a tree of size2 leaves with root2.
func VerifyConsistency(size1, size2 uint64, path [][]byte, root1, root2 [32]byte) error {
	err := proof.VerifyConsistency(rfc6962.DefaultHasher, size1, size2, path, root1[:], root2[:])
	var rm proof.RootMismatchError
	if errors.As(err, &rm) {
		return fmt.Errorf("the proof leads to root %x, not %x", rm.CalculatedRoot, rm.ExpectedRoot)
	}
	return err
}
