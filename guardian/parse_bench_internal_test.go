package guardian

import (
	"encoding/json"
	"testing"

	"github.com/acsledger/acsledger/acs"
)

// benchRequest is a signed-looking steps/toolCallRequest of typical size.
const benchRequest = `{"jsonrpc":"2.0","id":"r1","method":"steps/toolCallRequest","params":{` +
	`"acs_version":"0.1.0","request_id":"0b7e6f2a-1c3d-4e5f-8a9b-0c1d2e3f4a5b","timestamp":"2026-06-01T12:00:00Z",` +
	`"nonce":"0123456789abcdef0123",` +
	`"metadata":{"agent_id":"agent-7","session_id":"3f1e2d4c-5b6a-4789-8abc-def012345678","turn_id":"turn-1","environment":"production"},` +
	`"payload":{"tool":{"name":"read_file","description":"Read a file from the workspace"},"arguments":{}},` +
	`"signature":{"algorithm":"HMAC-SHA256","key_id":"agent-hmac-1","value":"q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA="}}}`

// BenchmarkRequestPath measures the Guardian's own parsing work on one
// request, the old way beside the new in the same run:
//
//	go test ./guardian -run XXX -bench BenchmarkRequestPath
//
// validate/two-parses is request-envelope.json over a strict parse and a
// decode of the whole request, then the hook schema over a strict parse
// and a decode of params.payload (schemas.Validate twice);
// validate/decode-once is one decode with both schemas over it
// (validateRequest). request-hash/canonicalize-params is acs.RequestHash
// over params as received; request-hash/canonical-cut cuts params from the
// canonical body serve already made and hashes it (requestHash with
// canonParams).
func BenchmarkRequestPath(b *testing.B) {
	raw := []byte(benchRequest)
	var env struct {
		Params struct {
			Payload json.RawMessage `json:"payload"`
		} `json:"params"`
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &env) != nil || json.Unmarshal(raw, &top) != nil {
		b.Fatal("bench request does not decode")
	}
	const method = "steps/toolCallRequest"
	b.Run("validate/two-parses", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if e := validateRequestTwoParses(raw, method, env.Params.Payload); e != nil {
				b.Fatal(e)
			}
		}
	})
	b.Run("validate/decode-once", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, e := validateRequest(raw, method); e != nil {
				b.Fatal(e)
			}
		}
	})
	canon, err := acs.Canonicalize(raw)
	if err != nil {
		b.Fatal(err)
	}
	want, _ := acs.RequestHash(top["params"])
	b.Run("request-hash/canonicalize-params", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if h, _ := requestHash(&request{params: top["params"]}); h != want {
				b.Fatal("wrong hash")
			}
		}
	})
	b.Run("request-hash/canonical-cut", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			req := &request{params: top["params"], canonParams: acs.CanonicalMember(canon, "params")}
			if h, _ := requestHash(req); h != want {
				b.Fatal("wrong hash")
			}
		}
	})
}
