package storeopen_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "acsledger-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	s, err := storeopen.Open(ctx, "sqlite:"+dir, ledger.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	first, err := s.Append(ctx, ledger.Record{SessionID: "sess-1", AgentID: "agent-7",
		Entry: []byte(`{"entry_id":"e1","step_id":"req-1","step_type":"steps/sessionStart"}`)})
	if err != nil {
		log.Fatal(err)
	}
	second, err := s.Append(ctx, ledger.Record{SessionID: "sess-1",
		Entry: []byte(`{"entry_id":"e2","step_id":"req-2","step_type":"steps/toolCallRequest"}`)})
	if err != nil {
		log.Fatal(err)
	}
	// The first entry is already in RFC 8785 form, so its entry_hash is
	// plain SHA-256 of the bytes (ACS §8.2: no previous hash to append).
	fmt.Println(first.Position, first.EntryHash)
	fmt.Println(second.Position, *second.PreviousHash == first.EntryHash)

	// A retry of the same step is answered with the original result.
	again, err := s.Append(ctx, ledger.Record{SessionID: "sess-1",
		Entry: []byte(`{"step_type":"steps/toolCallRequest","step_id":"req-2","entry_id":"e2"}`)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(again.Position, again.Replayed)
	// Output:
	// 0 fc90693b3e9fa92c38c72333a2112344384e8ea24dc240cd171d6caada901013
	// 1 true
	// 1 true
}
