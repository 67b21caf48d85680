package verify_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/acsledger/acsledger/verify"
)

// ExampleVerifyCOSEReceipt checks the COSE form of a receipt (an RFC 9942
// receipt in a SCITT transparent statement) with the log's key.
func ExampleVerifyCOSEReceipt() {
	doc, _ := os.ReadFile("testdata/cose/receipt-1.cose")
	key, _ := os.ReadFile("testdata/cose/log.vkey")
	trust := &verify.ReceiptTrust{Checkpoint: verify.CheckpointPolicy{LogKeys: []string{strings.TrimSpace(string(key))}}}
	rep, err := verify.VerifyCOSEReceipt(doc, trust)
	if err != nil {
		fmt.Println("unreadable:", err)
		return
	}
	fmt.Println(rep.Verified, rep.SessionID, rep.Position, rep.StepType, rep.Decision)
	fmt.Printf("leaf %d of %d in %s\n", rep.LeafIndex, rep.TreeSize, rep.Origin)

	doc[len(doc)-1] ^= 1 // the statement's signature
	rep, _ = verify.VerifyCOSEReceipt(doc, trust)
	fmt.Println(rep.Verified, rep.Findings[0].Code, rep.Findings[0].Where)
	// Output:
	// true sess-cose-5b1f0e2a 1 steps/toolCallRequest allow
	// leaf 3 of 4 in acsledger.test/cose
	// false cose_signature_invalid statement
}
