package acs_test

import (
	"fmt"
	"log"

	"github.com/acsledger/acsledger/acs"
)

// ExampleEntryHash hashes a two-entry chain (ACS §8.2): the first entry
// hashes its content alone; the second hashes its content followed by the
// first entry's hash, which its previous_hash member names.
func ExampleEntryHash() {
	first, err := acs.ParseEntry([]byte(`{
		"step_type": "steps/sessionStart", "entry_id": "e1", "step_id": "r1",
		"previous_hash": null
	}`))
	if err != nil {
		log.Fatal(err)
	}
	h1 := acs.EntryHash(first.Content, first.PreviousHash)
	fmt.Printf("%s\n%s\n", first.Content, h1)

	second, err := acs.ParseEntry([]byte(`{
		"entry_id": "e2", "step_id": "r2", "step_type": "steps/toolCallRequest",
		"previous_hash": "` + h1.String() + `",
		"entry_hash": "0000000000000000000000000000000000000000000000000000000000000000"
	}`))
	if err != nil {
		log.Fatal(err)
	}
	h2 := acs.EntryHash(second.Content, second.PreviousHash)
	fmt.Printf("%s\n%s\n", second.Content, h2)
	// The submitted entry_hash is never trusted: it is compared.
	fmt.Println(*second.EntryHash == h2)
	// Output:
	// {"entry_id":"e1","step_id":"r1","step_type":"steps/sessionStart"}
	// b0b544666c9f3d2066bd259f75a9dda6ca41606250af8b324cca9e6328e5d6fe
	// {"entry_id":"e2","step_id":"r2","step_type":"steps/toolCallRequest"}
	// 2ea884217a3158288cb2a2460c9fa8af4a0ebe1ce0f730571bda8bc8eb20a960
	// false
}
