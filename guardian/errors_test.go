package guardian_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/guardian"
)

// errEnv is a Guardian with one agent that completed its handshake over
// HTTP.
type errEnv struct {
	s  *setup
	tp transport
	a  *agent
}

func newErrEnv(t *testing.T, edit func(*guardian.Config), handshake bool) *errEnv {
	t.Helper()
	s := newSetup(t, "sqlite", edit)
	e := &errEnv{s: s, tp: newHTTP(t, s.g), a: newAgent(t, mustKeys(t).hmac, s.clock.Now)}
	if handshake {
		r := decode(t, e.tp.send(t, e.a.envelope(t, guardian.MethodHello, e.a.hello(t, nil), nil)))
		mustResult(t, r)
	}
	return e
}

func toolCall(name string) map[string]any {
	return map[string]any{"tool": map[string]any{"name": name}, "arguments": map[string]any{}}
}

// resign signs an envelope that was edited after signing with signer.
func resign(t *testing.T, body []byte, edit func(env map[string]any), signer sig.Signer) []byte {
	t.Helper()
	var env map[string]any
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	edit(env)
	if signer != nil {
		delete(params(env), "signature")
	}
	b, _ := json.Marshal(env)
	if signer == nil {
		return b
	}
	out, err := sig.SignEnvelope(b, sig.Params, signer)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func params(env map[string]any) map[string]any   { return env["params"].(map[string]any) }
func metadata(env map[string]any) map[string]any { return params(env)["metadata"].(map[string]any) }

// TestErrors sends one bad input per row and checks the code, data.reason,
// the message and, where the id could be read, its correlation.
func TestErrors(t *testing.T) {
	k := mustKeys(t)
	type row struct {
		name      string
		edit      func(*guardian.Config)
		handshake bool
		// bodies are sent in order; the answer to the last one is checked.
		bodies func(t *testing.T, e *errEnv) [][]byte
		code   int
		reason string
		msg    string
		nullID bool
		data   map[string]any
		// hmac: the answer is signed with the session's HMAC key (the request
		// was authenticated); otherwise with the Guardian's ECDSA key.
		hmac bool
	}
	one := func(b []byte) [][]byte { return [][]byte{b} }
	raw := func(s string) func(*testing.T, *errEnv) [][]byte {
		return func(*testing.T, *errEnv) [][]byte { return one([]byte(s)) }
	}
	step := func(edit func(env map[string]any)) func(*testing.T, *errEnv) [][]byte {
		return func(t *testing.T, e *errEnv) [][]byte {
			b := e.a.envelope(t, "steps/toolCallRequest", toolCall("read_file"), nil)
			if edit != nil {
				b = resign(t, b, edit, e.a.signer)
			}
			return one(b)
		}
	}
	unsignedStep := func(edit func(env map[string]any)) func(*testing.T, *errEnv) [][]byte {
		return func(t *testing.T, e *errEnv) [][]byte {
			b := e.a.envelope(t, "steps/toolCallRequest", toolCall("read_file"), nil)
			return one(resign(t, b, edit, nil))
		}
	}
	helloWith := func(edit func(h map[string]any)) func(*testing.T, *errEnv) [][]byte {
		return func(t *testing.T, e *errEnv) [][]byte {
			return one(e.a.envelope(t, guardian.MethodHello, e.a.hello(t, edit), nil))
		}
	}
	rows := []row{
		// JSON-RPC 2.0 (ACS §3, §17).
		{name: "truncated JSON", bodies: raw(`{"jsonrpc":"2.0","id":1,`), code: -32700, reason: "parse_error", msg: "not valid JSON", nullID: true},
		{name: "duplicate member", bodies: raw(`{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"system/ping","params":{}}`), code: -32700, msg: "duplicate", nullID: true},
		{name: "number out of range", bodies: raw(`{"jsonrpc":"2.0","id":1e400,"method":"system/ping","params":{}}`), code: -32700, msg: "IEEE 754", nullID: true},
		{name: "empty batch", bodies: raw(`[]`), code: -32600, reason: "empty_batch", msg: "empty batch", nullID: true},
		{name: "not an object", bodies: raw(`42`), code: -32600, reason: "not_a_request", msg: "JSON object", nullID: true},
		{name: "notification", bodies: raw(`{"jsonrpc":"2.0","method":"system/ping","params":{}}`), code: -32600, reason: "notification", msg: "id is missing", nullID: true},
		{name: "null id", bodies: raw(`{"jsonrpc":"2.0","id":null,"method":"system/ping","params":{}}`), code: -32600, reason: "invalid_id", msg: "string or a number", nullID: true},
		{name: "jsonrpc 1.0", bodies: raw(`{"jsonrpc":"1.0","id":"x","method":"system/ping","params":{}}`), code: -32600, reason: "invalid_jsonrpc", msg: `"2.0"`},
		{name: "method not a string", bodies: raw(`{"jsonrpc":"2.0","id":"x","method":7,"params":{}}`), code: -32600, reason: "invalid_method", msg: "method must be a string"},
		{name: "unknown envelope member", bodies: raw(`{"jsonrpc":"2.0","id":"x","method":"system/ping","params":{},"extra":1}`), code: -32600, reason: "unknown_member", msg: `"extra"`},
		{name: "unknown method", handshake: true, bodies: func(t *testing.T, e *errEnv) [][]byte {
			return one(e.a.envelope(t, "steps/notAHook", map[string]any{}, nil))
		}, code: -32601, reason: "method_not_found", msg: `"steps/notAHook"`, data: map[string]any{"method": "steps/notAHook"}},
		{name: "A2A is deferred", handshake: true, bodies: func(t *testing.T, e *errEnv) [][]byte {
			return one(e.a.envelope(t, "protocols/A2A/message/send", map[string]any{}, nil))
		}, code: -32601, msg: "deferred to ACS v0.2"},
		{name: "params missing", bodies: raw(`{"jsonrpc":"2.0","id":"x","method":"system/ping"}`), code: -32602, reason: "missing_params", msg: "params is missing"},
		{name: "request_id wrong type", handshake: true, bodies: step(func(env map[string]any) { params(env)["request_id"] = 12 }),
			code: -32602, reason: "invalid_params", msg: "params.request_id must be a string", data: map[string]any{"field": "params.request_id"}},
		{name: "request_id not a UUID", handshake: true, bodies: step(func(env map[string]any) { params(env)["request_id"] = "r-1" }),
			code: -32602, msg: "params.request_id \"r-1\" is not a UUID"},
		{name: "timestamp not RFC 3339", handshake: true, bodies: step(func(env map[string]any) { params(env)["timestamp"] = "yesterday" }),
			code: -32602, msg: "params.timestamp", data: map[string]any{"field": "params.timestamp"}},
		{name: "session_id not a UUID", bodies: step(func(env map[string]any) { metadata(env)["session_id"] = "s1" }),
			code: -32602, msg: "params.metadata.session_id"},
		{name: "agent_id missing", handshake: true, bodies: step(func(env map[string]any) { delete(metadata(env), "agent_id") }),
			code: -32602, msg: "params.metadata.agent_id is required"},
		{name: "payload not an object", handshake: true, bodies: step(func(env map[string]any) { params(env)["payload"] = "rm -rf" }),
			code: -32602, msg: "params.payload must be an object"},
		{name: "nonce too short", handshake: true, bodies: step(func(env map[string]any) { params(env)["nonce"] = "abc" }),
			code: -32602, msg: "params.nonce must be 16 to 64 characters"},
		{name: "acs_version not semver", handshake: true, bodies: step(func(env map[string]any) { params(env)["acs_version"] = "v0.1" }),
			code: -32602, msg: "params.acs_version"},
		{name: "ClientHello field of the wrong type", bodies: helloWith(func(h map[string]any) { h["methods_implemented"] = "steps/*" }),
			code: -32602, msg: "methods_implemented"},

		{name: "payload fails its hook schema", handshake: true, bodies: func(t *testing.T, e *errEnv) [][]byte {
			return one(e.a.envelope(t, "steps/toolCallRequest", map[string]any{"arguments": map[string]any{}}, nil))
		}, code: -32602, reason: "schema_violation", msg: "hooks/tool-call-request.json", data: map[string]any{"field": "params.payload"}},
		{name: "payload enum violated", handshake: true, bodies: func(t *testing.T, e *errEnv) [][]byte {
			return one(e.a.envelope(t, "steps/turnEnd", map[string]any{"turn_id": "t", "outcome": "finished"}, nil))
		}, code: -32602, reason: "schema_violation", msg: "params.payload.outcome", data: map[string]any{"field": "params.payload.outcome"}},
		{name: "metadata enum violated", handshake: true, bodies: step(func(env map[string]any) { metadata(env)["environment"] = "prod" }),
			code: -32602, reason: "schema_violation", msg: "request-envelope.json", data: map[string]any{"field": "params.metadata.environment"}},
		{name: "ClientHello transport unknown", bodies: helloWith(func(h map[string]any) { h["transports_supported"] = []string{"carrier-pigeon"} }),
			code: -32602, reason: "schema_violation", data: map[string]any{"field": "params.payload.transports_supported[0]"}},

		// ACS §17.1.
		{name: "step before handshake", bodies: step(nil), code: -32003, reason: "no_handshake", msg: "has not completed handshake/hello",
			data: map[string]any{"method": "handshake/hello"}},
		{name: "no common version", bodies: helloWith(func(h map[string]any) { h["acs_versions_supported"] = []string{"1.0.0", "0.2.0"} }),
			code: -32001, reason: "no_common_version", msg: "0.1.0", data: map[string]any{"supported_versions": []any{"0.1.0"}}},
		{name: "provenance required", edit: func(c *guardian.Config) { c.RequireProvenance = true },
			bodies: helloWith(func(h map[string]any) { h["provenance_producer"] = "none" }), code: -32002, reason: "provenance_required", msg: `provenance_producer "none"`, hmac: true},
		{name: "transport not declared", bodies: helloWith(func(h map[string]any) { h["transports_supported"] = []string{"stdio"} }),
			code: -32000, reason: "transport_not_supported", msg: "over http", hmac: true},
		{name: "agent refused", edit: func(c *guardian.Config) {
			c.AdmitAgent = func(id string) error { return errors.New("not on the allow list") }
		}, bodies: helloWith(nil), code: -32000, reason: "agent_refused", msg: "not on the allow list", hmac: true},
		{name: "second handshake", handshake: true, bodies: helloWith(nil), code: -32000, reason: "session_already_established", msg: "renegotiation", hmac: true},
		{name: "method not negotiated", handshake: true, bodies: func(t *testing.T, e *errEnv) [][]byte {
			return one(e.a.envelope(t, "protocols/MCP/resources/read", map[string]any{"uri": "file:///x"}, nil))
		}, code: -32003, reason: "method_not_negotiated", msg: "methods_implemented", data: map[string]any{"method": "protocols/MCP/resources/read"}, hmac: true},
		{name: "MCP version not negotiated", bodies: func(t *testing.T, e *errEnv) [][]byte {
			hello := e.a.envelope(t, guardian.MethodHello, e.a.hello(t, func(h map[string]any) {
				h["methods_implemented"] = []string{"wrapped:mcp-2024-11-05/tools/call"}
			}), nil)
			return [][]byte{hello, e.a.envelope(t, "wrapped:mcp-2024-11-05/tools/call", map[string]any{"name": "x"}, nil)}
		}, code: -32003, reason: "protocol_version_not_negotiated", msg: "wrapped_protocols", hmac: true},
		{name: "signature missing", handshake: true, bodies: unsignedStep(func(env map[string]any) { delete(params(env), "signature") }),
			code: -32004, reason: "signature_missing", msg: "signature"},
		{name: "signature over other content", handshake: true, bodies: unsignedStep(func(env map[string]any) {
			params(env)["payload"] = toolCall("delete_file")
		}), code: -32004, reason: "signature_mismatch", msg: "does not verify"},
		{name: "session_id lifted into another envelope", handshake: true, bodies: func(t *testing.T, e *errEnv) [][]byte {
			// A signature made for another session cannot be replayed here
			// (§10): it covers metadata.session_id. With an ECDSA key, the
			// same in both sessions, that coverage alone refuses it (an
			// HMAC key is derived per session, which would refuse it
			// anyway).
			victim := newAgent(t, k.agent, e.s.clock.Now)
			victim.shakeHands(t, e.tp)
			other := newAgent(t, k.agent, e.s.clock.Now)
			b := other.envelope(t, "steps/toolCallRequest", toolCall("read_file"), nil)
			if r := decode(t, e.tp.send(t, victim.envelope(t, "steps/toolCallRequest", toolCall("read_file"), nil))); r.decision() != "allow" {
				t.Fatalf("the victim's own request: %s", r.raw)
			}
			return one(resign(t, b, func(env map[string]any) { metadata(env)["session_id"] = victim.sessionID }, nil))
		}, code: -32004, reason: "signature_mismatch"},
		{name: "unknown key_id", handshake: true, bodies: unsignedStep(func(env map[string]any) {
			params(env)["signature"].(map[string]any)["key_id"] = "nobody"
		}), code: -32004, reason: "unknown_key_id", msg: "nobody"},
		{name: "key not bound at handshake", handshake: true, bodies: func(t *testing.T, e *errEnv) [][]byte {
			s, _ := k.other.Signer(e.a.sessionID)
			e.a.signer = s
			return one(e.a.envelope(t, "steps/toolCallRequest", toolCall("read_file"), nil))
		}, code: -32004, reason: "key_not_bound", msg: `bound to key_id "agent-hmac-1"`},
		{name: "request_id replayed", handshake: true, bodies: func(t *testing.T, e *errEnv) [][]byte {
			b := e.a.envelope(t, "steps/toolCallRequest", toolCall("read_file"), nil)
			return [][]byte{b, b}
		}, code: -32005, reason: "replay_detected", msg: "has already seen request_id", hmac: true},
		{name: "nonce replayed", handshake: true, bodies: func(t *testing.T, e *errEnv) [][]byte {
			n := func(p map[string]any) { p["nonce"] = "0123456789abcdef0123" }
			return [][]byte{
				e.a.envelope(t, "steps/toolCallRequest", toolCall("read_file"), n),
				e.a.envelope(t, "steps/toolCallRequest", toolCall("read_file"), n),
			}
		}, code: -32005, msg: "or its nonce", hmac: true},
		{name: "timestamp too old", handshake: true, bodies: step(func(env map[string]any) {
			params(env)["timestamp"] = t0.Add(-301 * time.Second).Format(time.RFC3339)
		}), code: -32006, reason: "timestamp_out_of_window", msg: "5m0s", data: map[string]any{"skew_window_ms": float64(300000)}, hmac: true},
		{name: "timestamp in the future", handshake: true, edit: func(c *guardian.Config) { c.SkewWindow = 2 * time.Second },
			bodies: step(func(env map[string]any) { params(env)["timestamp"] = t0.Add(3 * time.Second).Format(time.RFC3339) }),
			code:   -32006, msg: "3s away", data: map[string]any{"skew_window_ms": float64(2000)}, hmac: true},
		{name: "agent_id differs from handshake", handshake: true, bodies: step(func(env map[string]any) { metadata(env)["agent_id"] = "agent-8" }),
			code: -32000, reason: "agent_mismatch", msg: `bound to agent_id "agent-7"`, hmac: true},
		{name: "incompatible acs_version on a step", handshake: true, bodies: step(func(env map[string]any) { params(env)["acs_version"] = "1.0.0" }),
			code: -32001, reason: "unsupported_version", data: map[string]any{"supported_versions": []any{"0.1.0"}}, hmac: true},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			e := newErrEnv(t, r.edit, r.handshake)
			var ans []byte
			for _, b := range r.bodies(t, e) {
				ans = e.tp.send(t, b)
			}
			got := decode(t, ans)
			mustError(t, got, r.code, r.reason, r.msg)
			if r.nullID != (string(got.ID) == "null") {
				t.Errorf("id = %s; null expected: %v", got.ID, r.nullID)
			}
			for k, v := range r.data {
				if fmt.Sprint(got.Error.Data[k]) != fmt.Sprint(v) {
					t.Errorf("data.%s = %v, want %v", k, got.Error.Data[k], v)
				}
			}
			// Errors are signed too: with the session's HMAC key once the
			// session is known, otherwise with the Guardian's ECDSA key.
			if r.hmac {
				hmacChecker(t, e.a.sessionID, got.raw)
			} else {
				asymChecker(mustKeys(t).ecdsa)(t, "", got.raw)
			}
		})
	}
}

// TestBodyTooLarge: a body over MaxBodyBytes is -32600 with the limit named,
// over HTTP (status 413) and over stdio (where the next frame still works).
func TestBodyTooLarge(t *testing.T) {
	s := newSetup(t, "sqlite", func(c *guardian.Config) { c.MaxBodyBytes = 600 })
	a := newAgent(t, nil, s.clock.Now)
	big := a.envelope(t, guardian.MethodPing, map[string]any{"echo": strings.Repeat("x", 700)}, nil)
	small := a.envelope(t, guardian.MethodPing, map[string]any{"echo": "ok"}, nil)
	for _, tp := range []transport{newHTTP(t, s.g), newStdio(t, s.g)} {
		t.Run(tp.name(), func(t *testing.T) {
			r := decode(t, tp.send(t, big))
			mustError(t, r, -32600, "body_too_large", "limit of 600 bytes")
			if r.Error.Data["max_body_bytes"] != float64(600) {
				t.Errorf("data.max_body_bytes = %v", r.Error.Data["max_body_bytes"])
			}
			if r := decode(t, tp.send(t, small)); r.decision() != "allow" {
				t.Fatalf("the request after an oversized one: %s", r.raw)
			}
		})
	}
}

// TestStdioBrokenFraming: a frame without Content-Length is answered with
// -32700 and ends the stream with an error.
func TestStdioBrokenFraming(t *testing.T) {
	s := newSetup(t, "sqlite", nil)
	var out bytes.Buffer
	err := s.g.ServeStdio(t.Context(), strings.NewReader("Content-Type: application/json\r\n\r\n{}"), &out)
	if err == nil || !strings.Contains(err.Error(), "no Content-Length") {
		t.Fatalf("ServeStdio = %v, want a framing error", err)
	}
	b, ferr := readFrame(bufioReader(&out))
	if ferr != nil {
		t.Fatalf("no framed answer: %v (%q)", ferr, out.String())
	}
	mustError(t, decode(t, b), -32700, "bad_framing", "no Content-Length")

	out.Reset()
	if err := s.g.ServeStdio(t.Context(), strings.NewReader("Content-Length: 50\r\n\r\n{}"), &out); err == nil || !strings.Contains(err.Error(), "fewer than 50 bytes") {
		t.Fatalf("truncated body: ServeStdio = %v", err)
	}
	if err := s.g.ServeStdio(t.Context(), strings.NewReader(""), &out); err != nil {
		t.Fatalf("empty stream: ServeStdio = %v, want nil", err)
	}
}
