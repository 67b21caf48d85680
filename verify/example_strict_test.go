package verify_test

import (
	"fmt"
	"os"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/verify"
)

func ExampleHeadChecker_RequireSignedHeads() {
	// The same session checked twice with the Guardian's HMAC-SHA256 IKM:
	// its heads verify, but an HMAC head does not show a third party who
	// issued it (ACS §8.6). Heads signed by a trusted ECDSA-P256 key do.
	k, _ := sig.ParseHMACKeyFlag("guardian-ikm-1=6163736c65646765722074616d70657220636f7270757320494b4d2c20333242")
	kd, _ := sig.LoadKeyDir("testdata/heads")
	for _, responses := range []string{"testdata/corpus/valid.responses.jsonl", "testdata/heads/ecdsa.responses.jsonl"} {
		keys, _ := sig.NewKeySet(k.Public())
		for _, id := range kd.KeySet.KeyIDs() {
			pub, _ := kd.KeySet.Get(id)
			keys.Add(pub)
		}
		hc := verify.NewHeadChecker(keys, "sess-7f3c9a52-1e4b-4d8a-9c61-0b2e5d7a8f14")
		hc.RequireSignedHeads(keys)
		entries, _ := os.Open("testdata/corpus/valid.jsonl")
		resp, _ := os.Open(responses)
		r, err := hc.VerifyChain(entries, resp)
		entries.Close()
		resp.Close()
		if err != nil {
			fmt.Println("input error:", err)
			return
		}
		fmt.Println(responses, "verified:", r.Verified())
		for _, f := range r.Findings {
			fmt.Printf("  %s at entry %d: actual %s\n", f.Code, f.EntryIndex, f.Actual)
		}
	}
	// Output:
	// testdata/corpus/valid.responses.jsonl verified: false
	//   head_unauthenticated at entry 0: actual HMAC-SHA256/guardian-ikm-1
	// testdata/heads/ecdsa.responses.jsonl verified: true
}
