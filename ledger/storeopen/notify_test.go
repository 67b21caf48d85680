package storeopen_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

func entryJSON(i int) string {
	return fmt.Sprintf(`{"entry_id":"e-%d","step_id":"req-%d","step_type":"steps/toolCallRequest","timestamp":"2026-11-30T10:00:%02dZ","decision":"allow","tool":{"name":"bash","args":{"cmd":"ls -la /tmp"}}}`, i, i, i%60)
}

// TestNotifyingStore: the log is woken after each committed append and only
// then.
func TestNotifyingStore(t *testing.T) {
	st, err := storeopen.Open(context.Background(), "sqlite:"+t.TempDir(), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var n int
	s := storeopen.NotifyOnAppend(st, func() { n++ })
	ctx := context.Background()
	if _, err := s.Append(ctx, ledger.Record{SessionID: "s", Entry: []byte(entryJSON(0))}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, ledger.Record{SessionID: "s", Entry: []byte(`{"entry_id":`)}); err == nil {
		t.Fatal("malformed entry accepted")
	}
	if _, err := s.AppendBatch(ctx, []ledger.Record{{SessionID: "s", Entry: []byte(entryJSON(1))}, {SessionID: "t", Entry: []byte(entryJSON(2))}}); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("notified %d times, want 2 (one per committed append call)", n)
	}
}
