package verify_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/acsledger/acsledger/verify"
)

// A SIEM's copy of a session's events in which one event was edited (a
// deny passed off as an allow) and one entry's event replaced, checked
// against the session's evidence bundle.
func ExampleVerifyEvents() {
	bundle, err := os.ReadFile("testdata/bundles/valid.json")
	if err != nil {
		panic(err)
	}
	events, err := os.Open("testdata/events/mismatch.ndjson")
	if err != nil {
		panic(err)
	}
	defer events.Close()
	r, err := verify.VerifyEvents([][]byte{bundle}, events, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("verified:", r.Verified())
	for _, f := range r.Findings {
		fmt.Printf("%s at entry %d: %s\n", f.Code, f.EntryIndex, strings.SplitN(f.Message, " (", 2)[0])
	}
	// Output:
	// verified: false
	// event_mismatch at entry 2: the event's entry hash is not the ledger's at session sess-2b8e41d0-93c7-4f1a-b5e2-7d6c0a9f3e18 position 2
	// event_mismatch at entry 5: the ocsf event differs from the ledger's entry at severity
	// event_missing at entry 2: the copy has no event of entry 2 of session sess-2b8e41d0-93c7-4f1a-b5e2-7d6c0a9f3e18 that matches the ledger, only one that differs
	// event_missing at entry 5: the copy has no event of entry 5 of session sess-2b8e41d0-93c7-4f1a-b5e2-7d6c0a9f3e18 that matches the ledger, only one that differs
}
