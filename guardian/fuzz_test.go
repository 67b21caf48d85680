package guardian_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/acsledger/acsledger/acs/schemas"
	"github.com/acsledger/acsledger/guardian"
)

// FuzzServe: whatever body arrives, the Guardian answers with a response
// (or a batch of responses) that matches response-envelope.json.
//
// The seeds carry no valid signature, so inputs stop before the ledger:
// under -fuzz every package is coverage-instrumented, and the instrumented
// embedded SQLite is too slow to fuzz through. The parser, the envelope and
// schema checks, ping and the signature check are what this target covers.
func FuzzServe(f *testing.F) {
	s := newSetup(&testing.T{}, "sqlite", nil)
	tp := s.g
	a := newAgent(&testing.T{}, nil, s.clock.Now)
	for _, seed := range [][]byte{
		a.envelope(&testing.T{}, guardian.MethodHello, a.hello(&testing.T{}, nil), nil),
		a.envelope(&testing.T{}, "steps/toolCallRequest", toolCall("read_file"), nil),
		a.envelope(&testing.T{}, guardian.MethodPing, map[string]any{"echo": "x"}, nil),
		[]byte(`[{"jsonrpc":"2.0","id":1,"method":"system/ping","params":{}}, 7]`),
		[]byte(`{"jsonrpc":"2.0","id":"a","method":"steps/userMessage","params":{"payload":{}}}`),
		[]byte(`[]`), []byte(`"`), []byte(`{"a":1,"a":2}`),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out := guardian.ServeForTest(tp, body)
		var answers []json.RawMessage
		if bytes.HasPrefix(out, []byte("[")) {
			if err := json.Unmarshal(out, &answers); err != nil {
				t.Fatalf("batch answer is not JSON: %v\n%s", err, out)
			}
		} else {
			answers = []json.RawMessage{out}
		}
		for _, ans := range answers {
			if err := schemas.Validate(schemas.ResponseEnvelope, ans); err != nil {
				t.Fatalf("answer does not match response-envelope.json: %v\nbody %q\nanswer %s", err, body, ans)
			}
		}
	})
}
