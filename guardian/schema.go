package guardian

import (
	"errors"
	"fmt"
	"strings"

	"github.com/acsledger/acsledger/acs/rpcerr"
	"github.com/acsledger/acsledger/acs/schemas"
)

// payloadSchemas names the schema of each method's payload. Methods without
// a published payload schema (sessionStart, agentTrigger, turnStart,
// subagentStart, sessionEnd, agbom/*, MCP, system/ping) are checked by the
// request envelope alone: payload must be an object.
var payloadSchemas = map[string]string{
	MethodHello:                    schemas.ClientHello,
	"steps/userMessage":            "hooks/user-message.json",
	"steps/agentResponse":          "hooks/agent-response.json",
	"steps/knowledgeRetrieval":     "hooks/knowledge-retrieval.json",
	"steps/memoryContextRetrieval": "hooks/memory-context-retrieval.json",
	"steps/memoryStore":            "hooks/memory-store.json",
	"steps/toolCallRequest":        "hooks/tool-call-request.json",
	"steps/toolCallResult":         "hooks/tool-call-result.json",
	"steps/preCompact":             "hooks/pre-compact.json",
	"steps/postCompact":            "hooks/post-compact.json",
	"steps/subagentStop":           "hooks/subagent-stop.json",
	"steps/turnEnd":                "hooks/turn-end.json",
}

// validateRequest checks a request against request-envelope.json and its
// method's payload schema. A violation inside params is Invalid params
// (-32602), anything else Invalid Request (-32600); the message names the
// failing location as a dotted path (params.metadata.session_id).
//
// raw already passed the strict parse (serve canonicalizes the body), so
// it is decoded once here and the payload schema checks the decoded
// params.payload, not a second parse of it.
//
// It returns the decoded params (schemas.Decode's form) for the policy
// input and the provenance log, so that nothing decodes them again.
func validateRequest(raw []byte, method string) (map[string]any, *rpcerr.Error) {
	doc, err := schemas.Decode(raw)
	if err != nil {
		return nil, refuse(rpcerr.InvalidRequest, "schema_violation", fmt.Sprintf("%s: %v", schemas.RequestEnvelope, err))
	}
	if e := schemaError(schemas.RequestEnvelope, "", doc); e != nil {
		return nil, e
	}
	// The envelope schema made params and params.payload objects.
	params, _ := doc.(map[string]any)["params"].(map[string]any)
	name, ok := payloadSchemas[method]
	if !ok {
		return params, nil
	}
	// A missing payload would fail the payload schema's type check, not
	// panic.
	var payload any
	if params != nil {
		payload = params["payload"]
	}
	if e := schemaError(name, "/params/payload", payload); e != nil {
		return nil, e
	}
	return params, nil
}

// checkProvenance validates the payload of a session that accepted the
// acs-provenance profile against the strict variant of its hook schema,
// which requires provenance on every data-bearing field (ACS §7,
// conformance "ACS-Provenance"). Other sessions are ACS-Core: the base
// schemas (validateRequest) leave provenance optional.
func (s *session) checkProvenance(req *request) *rpcerr.Error {
	if !s.strictProvenance {
		return nil
	}
	strict := schemas.Strict(payloadSchemas[req.method])
	if strict == "" {
		return nil
	}
	return schemaError(strict, "/params/payload", req.paramsDoc["payload"])
}

func schemaError(name, prefix string, doc any) *rpcerr.Error {
	err := schemas.ValidateValue(name, doc)
	if err == nil {
		return nil
	}
	var se *schemas.Error
	if !errors.As(err, &se) {
		return refuse(rpcerr.InvalidRequest, "schema_violation", err.Error())
	}
	ptr := prefix + se.Pointer
	code := rpcerr.InvalidRequest
	if ptr == "/params" || strings.HasPrefix(ptr, "/params/") {
		code = rpcerr.InvalidParams
	}
	field := fieldPath(ptr)
	return refuse(code, "schema_violation", fmt.Sprintf("%s does not match %s: %s", field, schemaFile(name), se.Message),
		"field", field, "schema", schemaFile(name))
}

func schemaFile(name string) string {
	if name == schemas.ClientHello {
		return "handshake.json ClientHello"
	}
	return name
}

// fieldPath turns a JSON Pointer into the dotted path error messages use:
// /params/metadata/session_id -> params.metadata.session_id, /a/0 -> a[0].
func fieldPath(ptr string) string {
	if ptr == "" {
		return "the request"
	}
	var b strings.Builder
	for i, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		if tok != "" && strings.Trim(tok, "0123456789") == "" {
			fmt.Fprintf(&b, "[%s]", tok)
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}
