//go:build ignore

// gen_cose writes the COSE receipt vectors for package verify (cose/): a
// small log (RFC 9162 SHA-256 tree over acsledger leaves, docs/merkle-log.md)
// holding a three-entry session between leaves of other sessions, and the
// COSE form of the receipts (docs/receipts.md, "The COSE form") of its
// entries, signed with a fixed Ed25519 log key by verify.FormatCOSEReceipt,
// the producing code. manifest.json says what each receipt proves;
// example.diag is the first one in CBOR diagnostic notation (RFC 8949 §8),
// the worked example of docs/receipts.md.
//
// Entry hashes (ACS §8.2), leaves, trees and inclusion paths (RFC 9162
// §2.1.1, §2.1.3.1) are computed here with gowebpki/jcs and crypto/sha256,
// not with packages acs or verify. Ed25519 and deterministic CBOR make the
// output the same each run.
//
// Run from this directory: go run gen_cose.go
package main

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/fxamacker/cbor/v2"
	"github.com/gowebpki/jcs"

	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/verify"
)

const (
	dir     = "cose"
	origin  = "acsledger.test/cose"
	session = "sess-cose-5b1f0e2a"
)

// vector is one receipt of the manifest.
type vector struct {
	File      string `json:"file"`
	SessionID string `json:"session_id"`
	Position  uint64 `json:"position"`
	EntryHash string `json:"entry_hash"`
	LeafIndex uint64 `json:"leaf_index"`
	TreeSize  uint64 `json:"tree_size"`
	Root      string `json:"root"` // hex of the tree's root
}

type manifest struct {
	LogKey   string   `json:"log_key"` // note verifier key
	Origin   string   `json:"origin"`
	Receipts []vector `json:"receipts"`
}

// entryHash is ACS §8.2: SHA-256 of the RFC 8785 form of the entry
// without entry_hash and previous_hash, then the previous hash's raw bytes.
func entryHash(body string, prev []byte) []byte {
	c, err := jcs.Transform([]byte(body))
	if err != nil {
		log.Fatal(err)
	}
	h := sha256.New()
	h.Write(c)
	h.Write(prev)
	return h.Sum(nil)
}

// leaf is the log leaf (docs/merkle-log.md) in RFC 8785 form.
func leaf(sessionID string, position uint64, eh []byte) []byte {
	sid, _ := json.Marshal(sessionID)
	b, err := jcs.Transform([]byte(fmt.Sprintf(`{"v":1,"session_id":%s,"position":%d,"entry_hash":"%x"}`, sid, position, eh)))
	if err != nil {
		log.Fatal(err)
	}
	return b
}

func hashLeaf(b []byte) []byte {
	h := sha256.Sum256(append([]byte{0}, b...))
	return h[:]
}

func hashNode(l, r []byte) []byte {
	h := sha256.Sum256(append(append([]byte{1}, l...), r...))
	return h[:]
}

// split is k of RFC 9162 §2.1.1: the largest power of two below n.
func split(n int) int {
	k := 1
	for k*2 < n {
		k *= 2
	}
	return k
}

// mth is the Merkle Tree Hash of RFC 9162 §2.1.1 over leaf hashes.
func mth(d [][]byte) []byte {
	if len(d) == 1 {
		return d[0]
	}
	k := split(len(d))
	return hashNode(mth(d[:k]), mth(d[k:]))
}

// path is PATH(m, D[n]) of RFC 9162 §2.1.3.1.
func path(m int, d [][]byte) [][]byte {
	if len(d) == 1 {
		return nil
	}
	k := split(len(d))
	if m < k {
		return append(path(m, d[:k]), mth(d[k:]))
	}
	return append(path(m-k, d[k:]), mth(d[:k]))
}

func main() {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	var seed [32]byte
	copy(seed[:], "acsledger cose receipt vectors!!")
	skey, vkey, err := tlog.KeyFromSeed(origin, tlog.Ed25519, seed)
	if err != nil {
		log.Fatal(err)
	}
	_ = skey
	priv := ed25519.NewKeyFromSeed(seed[:])

	// The session: a denied tool call, its resolution, an allowed one.
	bodies := []string{
		`{"entry_id":"e-1","step_id":"req-1","step_type":"steps/toolCallRequest","timestamp":"2026-12-02T10:04:00Z","agent_id":"agent-7","decision":{"disposition":"deny","policy_references":[{"policy_id":"acsledger-baseline","policy_version":"1.1.0","rule_id":"shell.pipe_remote_to_interpreter"}],"reason_codes":["remote_code_execution"]}}`,
		`{"entry_id":"e-2","step_id":"req-2","step_type":"steps/toolCallRequest","timestamp":"2026-12-02T10:04:05Z","agent_id":"agent-7","decision":{"disposition":"allow","policy_references":[{"policy_id":"acsledger-baseline","policy_version":"1.1.0","rule_id":"default.allow"}]}}`,
		`{"entry_id":"e-3","step_id":"req-3","step_type":"steps/toolCallResult","timestamp":"2026-12-02T10:04:06Z","agent_id":"agent-7","decision":{"disposition":"allow"}}`,
	}
	type logged struct {
		sessionID string
		position  uint64
		entry     []byte // RFC 8785, chain links included
		eh        []byte
	}
	var entries []logged
	var prev []byte
	for i, b := range bodies {
		eh := entryHash(b, prev)
		prevJSON := "null"
		if prev != nil {
			prevJSON = `"` + hex.EncodeToString(prev) + `"`
		}
		full, err := jcs.Transform([]byte(strings.TrimSuffix(b, "}") + `,"entry_hash":"` + hex.EncodeToString(eh) + `","previous_hash":` + prevJSON + `}`))
		if err != nil {
			log.Fatal(err)
		}
		entries = append(entries, logged{session, uint64(i), full, eh})
		prev = eh
	}
	// The log: other sessions' leaves around the session's three.
	other := func(i int) logged {
		return logged{sessionID: fmt.Sprintf("sess-other-%d", i), eh: entryHash(fmt.Sprintf(`{"entry_id":"o-%d"}`, i), nil)}
	}
	order := []logged{entries[0], other(1), other(2), entries[1], other(3), other(4), entries[2]}
	var leaves [][]byte
	for _, l := range order {
		leaves = append(leaves, hashLeaf(leaf(l.sessionID, l.position, l.eh)))
	}

	// Each entry is anchored in the first checkpoint covering it: the log
	// signed at sizes 1, 4 and 7.
	anchors := []struct{ index, size int }{{0, 1}, {3, 4}, {6, 7}}
	m := manifest{LogKey: vkey, Origin: origin}
	for i, a := range anchors {
		e := entries[i]
		root := mth(leaves[:a.size])
		doc, err := verify.FormatCOSEReceipt(&verify.COSEStatement{
			Origin: origin, SessionID: e.sessionID, Position: e.position, Entry: e.entry,
			Index: uint64(a.index), Size: uint64(a.size), Proof: path(a.index, leaves[:a.size]), Root: [32]byte(root),
		}, priv, verify.COSEKeyID(vkey))
		if err != nil {
			log.Fatal(err)
		}
		file := fmt.Sprintf("receipt-%d.cose", i)
		if err := os.WriteFile(filepath.Join(dir, file), doc, 0o644); err != nil {
			log.Fatal(err)
		}
		m.Receipts = append(m.Receipts, vector{File: file, SessionID: e.sessionID, Position: e.position,
			EntryHash: hex.EncodeToString(e.eh), LeafIndex: uint64(a.index), TreeSize: uint64(a.size), Root: hex.EncodeToString(root)})
		if i == 1 {
			dm, err := cbor.DiagOptions{ByteStringEmbeddedCBOR: true, ByteStringText: true}.DiagMode()
			if err != nil {
				log.Fatal(err)
			}
			diag, err := dm.Diagnose(doc)
			if err != nil {
				log.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "example.diag"), []byte(diag+"\n"), 0o644); err != nil {
				log.Fatal(err)
			}
		}
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), append(out, '\n'), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "log.vkey"), []byte(vkey+"\n"), 0o644); err != nil {
		log.Fatal(err)
	}
}
