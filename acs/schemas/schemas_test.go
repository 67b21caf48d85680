package schemas_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/acs/schemas"
)

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestEveryEmbeddedSchemaCompiles(t *testing.T) {
	names := schemas.Names()
	if len(names) < 20 {
		t.Fatalf("only %d schemas embedded: %v", len(names), names)
	}
	for _, n := range names {
		// An empty object is a valid JSON document for every schema to
		// run against; we only care that each compiles and runs.
		err := schemas.Validate(n, []byte(`{}`))
		var se *schemas.Error
		if err != nil && !errors.As(err, &se) {
			t.Errorf("%s: %v", n, err)
		}
	}
	for _, n := range []string{"context-entry.json", "ask-details.json", "defer-details.json"} {
		if !schemas.Ours(n) {
			t.Errorf("%s not marked as ours", n)
		}
		src, _ := schemas.Source(n)
		var m map[string]any
		if err := json.Unmarshal(src, &m); err != nil {
			t.Fatal(err)
		}
		if c, _ := m["$comment"].(string); !strings.Contains(c, "Not an official ACS schema") {
			t.Errorf("%s $comment does not say it is ours: %q", n, c)
		}
	}
	if schemas.Ours("request-envelope.json") {
		t.Error("request-envelope.json marked as ours")
	}
}

func TestValidDocuments(t *testing.T) {
	tests := []struct{ schema, file string }{
		{schemas.RequestEnvelope, "request-valid.json"},
		{schemas.ResponseEnvelope, "response-deny.json"},
		{schemas.ResponseEnvelope, "response-ask.json"},
		{schemas.ResponseEnvelope, "response-defer.json"},
		{schemas.ResponseEnvelope, "response-serverhello.json"},
		{schemas.ResponseEnvelope, "response-error.json"},
		{schemas.ContextEntry, "context-entry-first.json"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			if err := schemas.Validate(tt.schema, []byte(read(t, tt.file))); err != nil {
				t.Errorf("%v", err)
			}
		})
	}
	// Fragments reach $defs.
	if err := schemas.Validate(schemas.Signature, []byte(`{"algorithm":"SLH-DSA-128s","key_id":"k","value":"AAAA"}`)); err != nil {
		t.Error(err)
	}
	if err := schemas.Validate(schemas.DeferDetails, []byte(`{"resolution_method":"human_review","resolution_timeout_ms":1,"timeout_decision":"allow"}`)); err != nil {
		t.Error(err)
	}
}

func TestBrokenDocuments(t *testing.T) {
	tests := []struct {
		name, schema, file, old, new string
		pointer, mentions            string
	}{
		{"request_id not a uuid", schemas.RequestEnvelope, "request-valid.json",
			`"request_id": "0b7e6f2a-1c3d-4e5f-8a9b-0c1d2e3f4a5b"`, `"request_id": "req-1"`, "/params/request_id", "uuid"},
		{"unregistered algorithm", schemas.RequestEnvelope, "request-valid.json",
			`"HMAC-SHA256"`, `"Ed25519"`, "/params/signature/algorithm", "HMAC-SHA256"},
		{"timestamp not date-time", schemas.RequestEnvelope, "request-valid.json",
			`"2026-06-01T12:00:00Z"`, `"yesterday"`, "/params/timestamp", "date-time"},
		{"missing session_id", schemas.RequestEnvelope, "request-valid.json",
			`, "session_id": "3f1e2d4c-5b6a-4789-8abc-def012345678"`, ``, "/params/metadata", "session_id"},
		{"short nonce", schemas.RequestEnvelope, "request-valid.json",
			`"0123456789abcdef0123"`, `"0123"`, "/params/nonce", "16"},
		{"method outside namespaces", schemas.RequestEnvelope, "request-valid.json",
			`"steps/toolCallRequest"`, `"toolCallRequest"`, "/method", "pattern"},
		{"unknown top-level member", schemas.RequestEnvelope, "request-valid.json",
			`"jsonrpc": "2.0",`, `"jsonrpc": "2.0", "extra": 1,`, "", "extra"},
		{"deny without reasoning", schemas.ResponseEnvelope, "response-deny.json",
			`"reasoning": "rm -rf is not allowed",`, ``, "/result", "reasoning"},
		{"uppercase chain_hash", schemas.ResponseEnvelope, "response-deny.json",
			`5d41402abc4b2a76`, `5D41402ABC4B2A76`, "/result/chain_hash", "pattern"},
		{"unknown decision", schemas.ResponseEnvelope, "response-deny.json",
			`"decision": "deny"`, `"decision": "block"`, "/result/decision", "allow"},
		{"ask approver type", schemas.ResponseEnvelope, "response-ask.json",
			`"type": "human"`, `"type": "robot"`, "/result/ask_details/approver/type", "human"},
		{"intent_extension scope", schemas.ResponseEnvelope, "response-ask.json",
			`"scope": "session"`, `"scope": "forever"`, "/result/ask_details/intent_extension/scope", "this_request"},
		{"defer without timeout_decision", schemas.ResponseEnvelope, "response-defer.json",
			`, "timeout_decision": "deny"`, ``, "/result/defer_details", "timeout_decision"},
		{"defer timeout zero", schemas.ResponseEnvelope, "response-defer.json",
			`"resolution_timeout_ms": 30000`, `"resolution_timeout_ms": 0`, "/result/defer_details/resolution_timeout_ms", "minimum"},
		{"result and error", schemas.ResponseEnvelope, "response-error.json",
			`"id": null,`, `"id": null, "result": {"type": "final"},`, "/result", ""},
		{"error code not integer", schemas.ResponseEnvelope, "response-error.json",
			`-32004`, `"x"`, "/error/code", "integer"},
		{"previous_hash not hex", schemas.ContextEntry, "context-entry-first.json",
			`"previous_hash": null`, `"previous_hash": "00"`, "/previous_hash", ""},
		{"missing entry_hash", schemas.ContextEntry, "context-entry-first.json",
			`"entry_hash": "5d41402abc4b2a76b9719d911017c592aaf4c8e5e1b1b3c0f2a4c6e8d0b2f4a6",`, ``, "", "entry_hash"},
		{"bad origin in summary", schemas.ContextEntry, "context-entry-first.json",
			`["user_input"]`, `["llm"]`, "/provenance_summary/origins_seen/0", "user_input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := read(t, tt.file)
			broken := strings.Replace(doc, tt.old, tt.new, 1)
			if broken == doc {
				t.Fatalf("replacement %q not found in %s", tt.old, tt.file)
			}
			err := schemas.Validate(tt.schema, []byte(broken))
			var se *schemas.Error
			if !errors.As(err, &se) {
				t.Fatalf("Validate = %v, want a *schemas.Error", err)
			}
			if se.Pointer != tt.pointer {
				t.Errorf("pointer %q, want %q (%v; others %v)", se.Pointer, tt.pointer, err, se.Others)
			}
			if !strings.Contains(err.Error(), tt.mentions) {
				t.Errorf("error %q does not mention %q", err, tt.mentions)
			}
			// The decode-once path gives the same error, field for field.
			v, derr := schemas.Decode([]byte(broken))
			if derr != nil {
				t.Fatalf("Decode: %v", derr)
			}
			verr := schemas.ValidateValue(tt.schema, v)
			var vse *schemas.Error
			if !errors.As(verr, &vse) {
				t.Fatalf("ValidateValue = %v, want a *schemas.Error", verr)
			}
			if !reflect.DeepEqual(vse, se) {
				t.Errorf("ValidateValue = %#v\nValidate      = %#v", vse, se)
			}
			if verr.Error() != err.Error() {
				t.Errorf("ValidateValue says %q, Validate %q", verr, err)
			}
		})
	}
}

// TestValidateValueNumbers checks that Decode keeps numbers exact: an
// integer above 2^53 is still an integer, and a fraction is not one.
func TestValidateValueNumbers(t *testing.T) {
	for _, tt := range []struct {
		timeout string
		ok      bool
	}{
		{"9007199254740993", true},
		{"1.5", false},
		{"0", false},
	} {
		doc := `{"resolution_method":"human_review","resolution_timeout_ms":` + tt.timeout + `,"timeout_decision":"allow"}`
		v, err := schemas.Decode([]byte(doc))
		if err != nil {
			t.Fatalf("Decode(%s): %v", doc, err)
		}
		verr := schemas.ValidateValue(schemas.DeferDetails, v)
		err = schemas.Validate(schemas.DeferDetails, []byte(doc))
		if (verr == nil) != tt.ok || (err == nil) != tt.ok {
			t.Errorf("resolution_timeout_ms %s: ValidateValue = %v, Validate = %v, want ok %v", tt.timeout, verr, err, tt.ok)
		}
		var se *schemas.Error
		if !tt.ok && (!errors.As(verr, &se) || se.Pointer != "/resolution_timeout_ms") {
			t.Errorf("resolution_timeout_ms %s: ValidateValue = %v, want an *Error at /resolution_timeout_ms", tt.timeout, verr)
		}
	}
	if err := schemas.ValidateValue("no-such.json", map[string]any{}); err == nil || !strings.Contains(err.Error(), "no-such.json") {
		t.Errorf("ValidateValue of an unknown schema = %v", err)
	}
}

func TestStrictParse(t *testing.T) {
	err := schemas.Validate(schemas.Signature, []byte(`{"algorithm":"HMAC-SHA256","key_id":"k","key_id":"k2","value":"AAAA"}`))
	var se *schemas.Error
	if err == nil || errors.As(err, &se) || !strings.Contains(err.Error(), "duplicate") {
		t.Errorf("duplicate member: %v", err)
	}
	if err := schemas.Validate("no-such.json", []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "no-such.json") {
		t.Errorf("unknown schema: %v", err)
	}
}

func ExampleValidate() {
	err := schemas.Validate(schemas.DeferDetails, []byte(`{"resolution_method":"retry","resolution_timeout_ms":-1,"timeout_decision":"deny"}`))
	var se *schemas.Error
	if errors.As(err, &se) {
		fmt.Println(se.Pointer)
	}
	// Output: /resolution_timeout_ms
}
