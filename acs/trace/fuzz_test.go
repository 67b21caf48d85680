package trace

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzRoundTrip: whatever entry Encode accepts, every event of every
// format is one line of valid JSON that Parse reads back with the same
// evidence handle, and that Compare finds equal to the entry it came from.
func FuzzRoundTrip(f *testing.F) {
	for _, d := range []string{"allow", "deny", "ask"} {
		f.Add(guardianEntry("steps/toolCallRequest", d), "agent", true)
	}
	for _, e := range ingestEntries {
		f.Add([]byte(e), "", false)
	}
	f.Add([]byte(`{"step_type":"x\n\u2028","decision":"modify","timestamp":"bad"}`), "a\"b", true)
	f.Fuzz(func(t *testing.T, entry []byte, agent string, anchored bool) {
		li := uint64(9)
		ev := Evidence{Origin: "o", SessionID: "s", AgentID: agent, Position: 3, EntryHash: testHash, Source: "guardian", Entry: entry}
		if anchored {
			ev.LeafIndex = &li
			ev.Checkpoint = &Checkpoint{Origin: "o", Size: 10, RootHash: testHash}
		}
		for _, f := range Formats {
			evs, err := EncodeAll(f, ev, Options{})
			if err != nil {
				return
			}
			for i, e := range evs {
				if !json.Valid(e) || bytes.ContainsAny(e, "\n\r") {
					t.Fatalf("%s event %d is not one line of JSON: %q", f, i, e)
				}
				p, err := Parse(e)
				if err != nil {
					t.Fatalf("%s event %d: Parse: %v\n%s", f, i, err, e)
				}
				if p.Format != f || p.Handle.SessionID != "s" || p.Handle.Position != 3 || p.Handle.EntryHash != testHash || p.Finding != (i == 1) {
					t.Fatalf("%s event %d: read back %+v", f, i, p)
				}
				ctx := p.Context()
				ctx.Entry = entry
				if m, err := p.Compare(ctx); err != nil || m != "" {
					t.Fatalf("%s event %d: Compare = %q, %v\n%s", f, i, m, err, e)
				}
			}
		}
	})
}
