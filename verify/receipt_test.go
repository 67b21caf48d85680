package verify_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/verify"
)

// exampleReceipt returns a receipt of a one-leaf log for a denied tool
// call with its HMAC-signed response, the log's verifier key and the key
// set that checks the response. edit, if not nil, changes the entry after
// it was logged.
func exampleReceipt(edit func(string) string) (doc []byte, vkey string, keys *sig.KeySet) {
	const session = "s-1"
	body := `{"decision":{"disposition":"deny","policy_references":[{"policy_id":"shell","policy_version":"1.1.0","rule_id":"no-rm"}]},"entry_id":"e-1","step_id":"req-1","step_type":"steps/toolCallRequest","timestamp":"2026-03-14T10:04:00Z"}`
	e, err := acs.ParseEntry([]byte(body))
	if err != nil {
		panic(err)
	}
	h := acs.EntryHash(e.Content, nil)
	entry := strings.TrimSuffix(body, "}") + `,"entry_hash":"` + h.String() + `","previous_hash":null}`

	hk, _ := sig.NewHMACKey("guardian-hmac", bytes.Repeat([]byte{7}, 32))
	signer, _ := hk.Signer(session)
	resp, err := sig.SignEnvelope([]byte(`{"jsonrpc":"2.0","id":1,"result":{"type":"final","request_id":"req-1","decision":"deny","chain_hash":"`+h.String()+`"}}`), sig.Result, signer)
	if err != nil {
		panic(err)
	}
	keys, _ = sig.NewKeySet(hk.Public())

	// A log of one leaf: its root is the leaf hash, the proof is empty.
	leaf, _ := verify.LeafHash(session, 0, h)
	skey, vkey, _ := note.GenerateKey(rand.Reader, "example.com/log")
	ns, _ := note.NewSigner(skey)
	cp, _ := note.Sign(&note.Note{Text: "example.com/log\n1\n" + base64.StdEncoding.EncodeToString(leaf[:]) + "\n"}, ns)

	if edit != nil {
		entry = edit(entry)
	}
	x, _ := json.Marshal(map[string]any{"format": verify.ReceiptFormat, "version": 1, "session_id": session, "position": 0,
		"entry": json.RawMessage(entry), "response": json.RawMessage(resp),
		"policy_references": []map[string]string{{"policy_id": "shell", "policy_version": "1.1.0", "rule_id": "no-rm"}}})
	extra, err := acs.Canonicalize(x)
	if err != nil {
		panic(err)
	}
	return verify.FormatReceipt(extra, 0, nil, cp), vkey, keys
}

func ExampleVerifyReceipt() {
	doc, vkey, keys := exampleReceipt(nil)
	trust := &verify.ReceiptTrust{ResponseKeys: keys, Checkpoint: verify.CheckpointPolicy{LogKeys: []string{vkey}}}
	r, err := verify.VerifyReceipt(doc, trust, nil)
	if err != nil {
		fmt.Println("input error:", err)
		return
	}
	fmt.Println("verified:", r.Verified, r.SessionID, r.Position, r.StepType, r.Decision, r.PolicyReferences[0].PolicyVersion)

	// The decision turned into an allow after it was logged.
	doc, vkey, keys = exampleReceipt(func(e string) string { return strings.Replace(e, `"deny"`, `"allow"`, 1) })
	trust = &verify.ReceiptTrust{ResponseKeys: keys, Checkpoint: verify.CheckpointPolicy{LogKeys: []string{vkey}}}
	r, _ = verify.VerifyReceipt(doc, trust, nil)
	fmt.Println("verified:", r.Verified, r.Decision)
	for _, f := range r.Findings {
		fmt.Println(f.Code)
	}
	// Output:
	// verified: true s-1 0 steps/toolCallRequest deny 1.1.0
	// verified: false allow
	// entry_hash_mismatch
	// inclusion_proof_invalid
}

// FuzzReceipt: parsing never panics; what parses formats back to the same
// bytes (one spelling), and verifying it never panics and gives either an
// input error naming a line of the input or a consistent report.
func FuzzReceipt(f *testing.F) {
	doc, vkey, keys := exampleReceipt(nil)
	f.Add(doc)
	f.Add([]byte("c2sp.org/tlog-proof@v1\nindex 0\n\n"))
	f.Add([]byte("c2sp.org/tlog-proof@v1\nextra e30=\nindex 3\n" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n\nx\n1\nAA==\n\n— x AAAA\n"))
	trust := &verify.ReceiptTrust{ResponseKeys: keys, Checkpoint: verify.CheckpointPolicy{LogKeys: []string{vkey}}}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := verify.ParseReceipt(data)
		if err == nil {
			if back := verify.FormatReceipt(r.Extra, r.Index, r.Proof, r.Checkpoint); !bytes.Equal(back, data) {
				t.Fatalf("round trip:\n%q\n%q", data, back)
			}
		}
		rep, err := verify.VerifyReceipt(data, trust, nil)
		if err != nil {
			var ie *verify.InputError
			if !errors.As(err, &ie) || ie.Line < 1 || ie.Line > bytes.Count(data, []byte("\n"))+1 {
				t.Fatalf("error %v", err)
			}
			return
		}
		if rep.Verified != (len(rep.Findings) == 0) {
			t.Fatalf("report %+v", rep)
		}
		if rep.Verified {
			// Everything a receipt says is signed or hashed: a receipt
			// that verifies says what the seed says (signature lines by
			// keys not trusted may differ: they are ignored).
			got, _ := verify.ParseReceipt(data)
			seed, _ := verify.ParseReceipt(doc)
			if !bytes.Equal(got.Extra, seed.Extra) || got.Index != seed.Index || sha256.Sum256(got.Checkpoint[:bytes.Index(got.Checkpoint, []byte("\n\n"))]) != sha256.Sum256(seed.Checkpoint[:bytes.Index(seed.Checkpoint, []byte("\n\n"))]) {
				t.Fatalf("a receipt that says something else verifies:\n%s", data)
			}
		}
	})
}
