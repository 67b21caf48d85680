package verify_test

import (
	"bufio"
	"errors"
	"fmt"
	"strings"

	"github.com/acsledger/acsledger/acs"
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
