package guardian

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/acs/rpcerr"
	"github.com/acsledger/acsledger/acs/schemas"
)

// validateRequestTwoParses is how requests were validated before
// validateRequest decoded them once: the whole request parsed and checked
// against request-envelope.json, then params.payload parsed again and
// checked against its hook schema. TestValidateRequestDecodeOnce holds the
// decode-once path to the same answers.
func validateRequestTwoParses(raw []byte, method string, payload json.RawMessage) *rpcerr.Error {
	check := func(name, prefix string, doc []byte) *rpcerr.Error {
		var v any
		if err := schemas.Validate(name, doc); err != nil {
			// Re-enter schemaError with the decoded document so the
			// wire error is built one way; the *schemas.Error must be
			// the one Validate gave.
			v, _ = schemas.Decode(doc)
			if verr := schemas.ValidateValue(name, v); verr == nil || verr.Error() != err.Error() {
				return refuse(rpcerr.InternalError, "", "Validate and ValidateValue disagree: "+err.Error())
			}
			return schemaError(name, prefix, v)
		}
		return nil
	}
	if e := check(schemas.RequestEnvelope, "", raw); e != nil {
		return e
	}
	if name, ok := payloadSchemas[method]; ok {
		return check(name, "/params/payload", payload)
	}
	return nil
}

func TestValidateRequestDecodeOnce(t *testing.T) {
	const good = `{"jsonrpc":"2.0","id":"r1","method":"steps/toolCallRequest","params":{` +
		`"acs_version":"0.1.0","request_id":"0b7e6f2a-1c3d-4e5f-8a9b-0c1d2e3f4a5b","timestamp":"2026-06-01T12:00:00Z",` +
		`"metadata":{"agent_id":"agent-7","session_id":"3f1e2d4c-5b6a-4789-8abc-def012345678"},` +
		`"payload":{"tool":{"name":"read_file"},"arguments":{}}}}`
	rows := []struct {
		name, method, old, new string
		field                  string // "" means the request validates
	}{
		{"valid", "", "", "", ""},
		{"payload fails its hook schema", "", `"tool":{"name":"read_file"},`, ``, "params.payload"},
		{"tool name wrong type", "", `{"name":"read_file"}`, `{"name":7}`, "params.payload.tool.name"},
		{"metadata enum violated", "", `"agent_id":"agent-7"`, `"agent_id":"agent-7","environment":"prod"`, "params.metadata.environment"},
		{"request_id not a uuid", "", `"0b7e6f2a-1c3d-4e5f-8a9b-0c1d2e3f4a5b"`, `"r-1"`, "params.request_id"},
		{"timestamp not date-time", "", `"2026-06-01T12:00:00Z"`, `"yesterday"`, "params.timestamp"},
		{"short nonce", "", `"timestamp"`, `"nonce":"abc","timestamp"`, "params.nonce"},
		{"bad signature algorithm", "", `"timestamp"`, `"signature":{"algorithm":"Ed25519","key_id":"k","value":"AAAA"},"timestamp"`, "params.signature.algorithm"},
		{"turnEnd outcome enum", "steps/turnEnd", `{"tool":{"name":"read_file"},"arguments":{}}`, `{"turn_id":"t","outcome":"finished"}`, "params.payload.outcome"},
		{"hello transport unknown", MethodHello, `{"tool":{"name":"read_file"},"arguments":{}}`,
			`{"acs_versions_supported":["0.1.0"],"methods_implemented":["steps/*"],"transports_supported":["carrier-pigeon"],"provenance_producer":"none"}`,
			"params.payload.transports_supported[0]"},
		{"method without payload schema", "steps/sessionStart", `{"tool":{"name":"read_file"},"arguments":{}}`, `{"anything":[1,2]}`, ""},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			method := r.method
			if method == "" {
				method = "steps/toolCallRequest"
			}
			body := strings.Replace(good, `"steps/toolCallRequest"`, `"`+method+`"`, 1)
			if r.old != "" {
				b := strings.Replace(body, r.old, r.new, 1)
				if b == body {
					t.Fatalf("%q not found in the request", r.old)
				}
				body = b
			}
			var env struct {
				Params struct {
					Payload json.RawMessage `json:"payload"`
				} `json:"params"`
			}
			if err := json.Unmarshal([]byte(body), &env); err != nil {
				t.Fatal(err)
			}
			_, got := validateRequest([]byte(body), method)
			want := validateRequestTwoParses([]byte(body), method, env.Params.Payload)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decode once: %+v\ntwo parses:  %+v", got, want)
			}
			if r.field == "" {
				if got != nil {
					t.Fatalf("validateRequest = %+v, want no error", got)
				}
				return
			}
			if got == nil {
				t.Fatalf("validateRequest accepted the request; want an error at %s", r.field)
			}
			if got.Data["field"] != r.field || got.Data["reason"] != "schema_violation" || !strings.Contains(fmt.Sprint(got.Data["message"]), r.field) {
				t.Errorf("validateRequest = %d %q %v, want schema_violation naming %s", got.Code, got.Message, got.Data, r.field)
			}
			if got.Code != rpcerr.InvalidParams {
				t.Errorf("code %d, want %d (the failure is inside params)", got.Code, rpcerr.InvalidParams)
			}
		})
	}
}
