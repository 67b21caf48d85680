// Package acsagent is the signed ACS agent that the tree's load
// generators share: `acsledger bench` and its soak, `acsledger demo` and
// the fault drills (internal/drills) all speak to a Guardian through it.
// A Session is one ACS session whose requests are signed with an
// HMAC-SHA256 key (ACS §10: the per-session key is derived from the key's
// IKM and the session id) and posted to the Guardian's POST /acs, one at
// a time.
package acsagent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/guardian"
)

// Session is one HMAC-signed ACS session of an agent: it builds envelopes
// and sends them to a Guardian over HTTP, one at a time.
type Session struct {
	// ID is the session_id, a fresh UUID.
	ID string
	// AgentID is the agent_id of the requests' metadata.
	AgentID string
	signer  sig.Signer
	acsURL  string
	client  *http.Client
	nextID  int
}

// New returns a new session of agentID against the Guardian at base
// (its POST /acs is base+"/acs"), signing with key, an HMAC-SHA256 key.
// client may be nil when the session only builds envelopes.
func New(base, agentID string, key *sig.PrivateKey, client *http.Client) (*Session, error) {
	s := &Session{ID: acs.NewUUID(), AgentID: agentID, acsURL: base + "/acs", client: client}
	signer, err := key.Signer(s.ID)
	if err != nil {
		return nil, err
	}
	s.signer = signer
	return s, nil
}

// URL is the Guardian's POST /acs endpoint the session sends to.
func (s *Session) URL() string { return s.acsURL }

// Params returns the ACS params object of a new request: a fresh
// request_id, the time and the session's metadata, with the
// method-specific members of body (payload, or a wrapped MCP message).
func (s *Session) Params(body map[string]any) map[string]any {
	p := map[string]any{
		"acs_version": guardian.Version,
		"request_id":  acs.NewUUID(),
		"timestamp":   time.Now().UTC().Format(time.RFC3339Nano),
		"metadata":    map[string]any{"agent_id": s.AgentID, "session_id": s.ID},
	}
	for k, v := range body {
		p[k] = v
	}
	return p
}

// Envelope returns the signed JSON-RPC request for method.
func (s *Session) Envelope(method string, params map[string]any) ([]byte, error) {
	s.nextID++
	env, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": s.nextID, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	return sig.SignEnvelope(env, sig.Params, s.signer)
}

// Post sends one signed request built from body and returns its
// request_id, the HTTP status of the answer and the answer's body. It
// neither checks the status nor decodes the answer: Send does.
func (s *Session) Post(ctx context.Context, method string, body map[string]any) (requestID string, status int, raw []byte, err error) {
	params := s.Params(body)
	requestID = params["request_id"].(string)
	env, err := s.Envelope(method, params)
	if err != nil {
		return requestID, 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.acsURL, bytes.NewReader(env))
	if err != nil {
		return requestID, 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return requestID, 0, nil, err
	}
	raw, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return requestID, resp.StatusCode, nil, fmt.Errorf("%s: reading the answer: %w", method, err)
	}
	return requestID, resp.StatusCode, raw, nil
}

// Result is the part of a Guardian's signed result the agents read.
type Result struct {
	RequestID   string          `json:"request_id"`
	Decision    string          `json:"decision"`
	Reasoning   string          `json:"reasoning"`
	ReasonCodes []string        `json:"reason_codes"`
	ChainHash   string          `json:"chain_hash"`
	AskDetails  *acs.AskDetails `json:"ask_details"`
}

// RPCError is a JSON-RPC error answer; Data.Reason is the ACS reason of
// a signed error.
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    struct {
		Reason string `json:"reason"`
	} `json:"data"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// Reply is a Guardian's JSON-RPC answer: a result or an error.
type Reply struct {
	Result *Result   `json:"result"`
	Error  *RPCError `json:"error"`
}

// Send posts a signed request and returns the decision and the raw answer.
// An HTTP status other than 200 and a JSON-RPC error are errors; every
// answer but handshake/hello's must carry a decision.
func (s *Session) Send(ctx context.Context, method string, body map[string]any) (*Result, []byte, error) {
	_, status, raw, err := s.Post(ctx, method, body)
	if err != nil {
		return nil, raw, err
	}
	if status != http.StatusOK {
		return nil, raw, fmt.Errorf("%s: HTTP %d: %s", method, status, bytes.TrimSpace(raw))
	}
	var r Reply
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, raw, fmt.Errorf("%s: the answer is not JSON-RPC: %v", method, err)
	}
	if r.Error != nil {
		return nil, raw, fmt.Errorf("%s: %w", method, r.Error)
	}
	if r.Result == nil || (r.Result.Decision == "" && method != guardian.MethodHello) {
		return nil, raw, fmt.Errorf("%s: the answer has no decision: %s", method, raw)
	}
	return r.Result, raw, nil
}

// HelloBody is a ClientHello declaring every hook and MCP wrapping.
func HelloBody() map[string]any {
	return map[string]any{"payload": map[string]any{
		"acs_versions_supported": []string{guardian.Version},
		"methods_implemented":    []string{"steps/*", "protocols/MCP/*"},
		"transports_supported":   []string{"http"},
		"provenance_producer":    "deterministic",
		"profiles_supported":     []string{"acs-core", "acs-audit"},
	}}
}

// Open sends handshake/hello and steps/sessionStart with the payload
// start, which must be allowed.
func (s *Session) Open(ctx context.Context, start map[string]any) error {
	if _, _, err := s.Send(ctx, guardian.MethodHello, HelloBody()); err != nil {
		return err
	}
	r, _, err := s.Send(ctx, "steps/sessionStart", map[string]any{"payload": start})
	if err != nil {
		return err
	}
	if r.Decision != string(guardian.Allow) {
		return fmt.Errorf("steps/sessionStart was answered %s: %s", r.Decision, r.Reasoning)
	}
	return nil
}

// Arg is a tool-call argument with its provenance (ACS §7).
func Arg(value any, provID, origin string) map[string]any {
	return map[string]any{"value": value, "provenance": map[string]any{"provenance_id": provID, "origin": origin}}
}

// ToolCall is the body of a steps/toolCallRequest of tool with args.
func ToolCall(tool string, args map[string]any) map[string]any {
	return map[string]any{"payload": map[string]any{"tool": map[string]any{"name": tool}, "arguments": args}}
}

// HMACKey returns the one HMAC-SHA256 key of a key directory.
func HMACKey(dir string) (*sig.PrivateKey, error) {
	kd, err := sig.LoadKeyDir(dir)
	if err != nil {
		return nil, fmt.Errorf("couldn't load keys from %s: %w", dir, err)
	}
	var found []*sig.PrivateKey
	for _, k := range kd.Private {
		if k.Algorithm() == sig.HMACSHA256 {
			found = append(found, k)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("key directory %s holds %d HMAC-SHA256 keys; the agent client needs exactly one (acsledger keygen --alg HMAC-SHA256)", dir, len(found))
	}
	return found[0], nil
}
