package verify_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/verify"
)

// chain returns a small valid session as JSON Lines, hashed per ACS §8.2.
func chain() []string {
	var lines []string
	var prev *acs.Hash
	for i, step := range []string{"steps/sessionStart", "steps/toolCallRequest", "steps/sessionEnd"} {
		body := fmt.Sprintf(`"entry_id":"e-%d","step_id":"req-%d","step_type":%q,"decision":"ALLOW"`, i, i, step)
		e, err := acs.ParseEntry([]byte("{" + body + "}"))
		if err != nil {
			panic(err)
		}
		h := acs.EntryHash(e.Content, prev)
		link := "null"
		if prev != nil {
			link = `"` + prev.String() + `"`
		}
		lines = append(lines, fmt.Sprintf(`{%s,"previous_hash":%s,"entry_hash":"%s"}`, body, link, h))
		prev = &h
	}
	return lines
}

func ExampleVerifyChain() {
	lines := chain()
	// Drop the tool call from the middle of the session.
	tampered := lines[0] + "\n" + lines[2] + "\n"

	r, err := verify.VerifyChain(strings.NewReader(tampered))
	if err != nil {
		fmt.Println("input error:", err)
		return
	}
	fmt.Println("verified:", r.Verified(), "entries:", r.Entries)
	for _, f := range r.Findings {
		fmt.Println(f.Code, f.EntryIndex, f.EntryID)
	}
	// Output:
	// verified: false entries: 2
	// previous_hash_mismatch 1 e-2
}

func ExampleVerifyChain_inputError() {
	_, err := verify.VerifyChain(strings.NewReader(chain()[0] + "\n{\"entry_id\": \n"))
	var ie *verify.InputError
	if errors.As(err, &ie) {
		fmt.Println("malformed input on line", ie.Line)
	}
	// Output:
	// malformed input on line 2
}

func ExampleChainVerifier() {
	lines := chain()
	// Turn the tool call's ALLOW into a DENY without re-hashing.
	lines[1] = strings.Replace(lines[1], "ALLOW", "DENY", 1)

	var v verify.ChainVerifier
	sc := bufio.NewScanner(strings.NewReader(strings.Join(lines, "\n")))
	for sc.Scan() {
		e, err := acs.ParseEntry(sc.Bytes())
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, f := range v.Add(e) {
			fmt.Printf("%s at entry %d (%s)\n", f.Code, f.EntryIndex, f.EntryID)
			fmt.Println(f.Message)
		}
	}
	fmt.Println(v.Entries(), "entries, head", v.Head())
	// Output:
	// entry_hash_mismatch at entry 1 (e-1)
	// The entry's content and previous_hash hash to 4ef33543094c438228f7f0f04ae9fa125fff9f7d65e7ec0971d1783ff3b72604, not to its stated entry_hash 41cbdbf1e82d881dae4c1b90b3b88e54e93163ee81d375d03593a79df3d9e4db.
	// 3 entries, head 77f780252cb30f86612aecd972c20486fb69c878b54c0ea4abdf5a62434f39e4
}

func ExampleVerifyChainHeads() {
	// A chain whose entry 6 was rewritten (a deny into an allow) and
	// re-hashed forward, checked against the responses the Guardian signed
	// with HMAC-SHA256 when it first answered.
	entries, _ := os.Open("testdata/corpus/rewritten.jsonl")
	defer entries.Close()
	responses, _ := os.Open("testdata/corpus/valid.responses.jsonl")
	defer responses.Close()
	k, _ := sig.ParseHMACKeyFlag("guardian-ikm-1=6163736c65646765722074616d70657220636f7270757320494b4d2c20333242")
	keys, _ := sig.NewKeySet(k.Public())

	r, err := verify.VerifyChainHeads(entries, responses, keys, "sess-7f3c9a52-1e4b-4d8a-9c61-0b2e5d7a8f14")
	if err != nil {
		fmt.Println("input error:", err)
		return
	}
	fmt.Println("verified:", r.Verified())
	for _, f := range r.Findings {
		fmt.Println(f.Code, "at entry", f.EntryIndex, f.StepID)
	}
	// Output:
	// verified: false
	// chain_mismatch at entry 6 req-0007
}

func ExampleVerifyBundle() {
	trustFile, _ := os.ReadFile("testdata/bundles/trust.json")
	trust, err := verify.ParseTrust(trustFile)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, name := range []string{"valid.json", "witness_quorum_not_met.json"} {
		f, _ := os.Open("testdata/bundles/" + name)
		r, err := verify.VerifyBundle(f, trust)
		f.Close()
		if err != nil {
			fmt.Println("input error:", err)
			return
		}
		fmt.Println(name, "verified:", r.Verified(), "entries:", r.Entries)
		for _, f := range r.Findings {
			fmt.Printf("  %s at %s: expected %s, actual %s\n", f.Code, f.Where, f.Expected, f.Actual)
		}
	}
	// Output:
	// valid.json verified: true entries: 9
	// witness_quorum_not_met.json verified: false entries: 9
	//   witness_quorum_not_met at checkpoints[1]: expected 2, actual 1
}

func ExampleLeafHash() {
	head, _ := acs.ParseHash("5eba080a3bd82c61d9c53dd320f4b99a82cef91a4e5abd199cfa9ab8b17bc3dd")
	leaf, _ := verify.LeafHash("sess-7f3c9a52-1e4b-4d8a-9c61-0b2e5d7a8f14", 9, head)
	// A one-leaf tree's root is its leaf hash: the empty proof verifies.
	fmt.Println(verify.VerifyInclusion(leaf, 0, 1, nil, leaf))
	// Output:
	// <nil>
}
