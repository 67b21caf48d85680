package guardian

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/rpcerr"
	"github.com/acsledger/acsledger/acs/sig"
)

// The JSON-RPC layer: one body in (a request or a batch), one body out.
// Every refusal is an *rpcerr.Error made by refuse; this file turns them
// into responses in one place.

// nullID is the id of a response to a request whose id cannot be read.
var nullID = json.RawMessage("null")

// request is one JSON-RPC request that passed the envelope checks.
type request struct {
	id     json.RawMessage
	method string
	spec   methodSpec
	// raw is the request object as received; params is its params member.
	raw    []byte
	params json.RawMessage
	// canonParams is the RFC 8785 form of params, cut from the canonical
	// form serve made of the body; nil when there is none (a batch
	// element), and then request_hash canonicalizes params itself.
	canonParams []byte
	// paramsDoc is params decoded once (schemas.Decode's form: numbers
	// are json.Number), shared read-only by the policy input and the
	// provenance log.
	paramsDoc map[string]any

	acsVersion string
	requestID  string
	timestamp  time.Time
	nonce      string
	sessionID  string
	agentID    string
	turnID     string
	// clientHead is metadata.session_state.chain_hash, "" when absent.
	clientHead string
	payload    json.RawMessage
	signed     bool
}

// response is a JSON-RPC response before signing.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcerr.Error   `json:"error,omitempty"`
}

// refuse returns a wire error with a specific data.reason, a message naming
// what is wrong, and extra data members.
func refuse(code rpcerr.Code, reason, message string, data ...any) *rpcerr.Error {
	e := rpcerr.New(code, message)
	if reason != "" {
		e.Data["reason"] = reason
	}
	for i := 0; i+1 < len(data); i += 2 {
		e.Data[data[i].(string)] = data[i+1]
	}
	return e
}

// serve answers one body from transport ("http", "https" or "stdio").
func (g *Guardian) serve(ctx context.Context, body []byte, transport string) []byte {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	// The batch's length is checked before anything else reads the body,
	// so an oversized batch costs a scan of MaxBatch+1 elements at most.
	if n, ok := batchLen(trimmed, MaxBatch); ok && n > MaxBatch {
		return g.bodyError(ctx, refuse(rpcerr.InvalidRequest, "batch_too_long",
			fmt.Sprintf("a batch may hold at most %d requests; this one holds more", MaxBatch),
			"max_batch", MaxBatch))
	}
	// RFC 8785 / I-JSON first: duplicate members, invalid UTF-8, lone
	// surrogates and out-of-range numbers have no canonical form, so
	// neither a signature nor a request_hash could be computed over them.
	canon, err := acs.Canonicalize(body)
	if err != nil {
		return g.bodyError(ctx, refuse(rpcerr.ParseError, "parse_error", fmt.Sprintf("the body is not valid JSON: %v", err)))
	}
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var batch []json.RawMessage
		if err := json.Unmarshal(trimmed, &batch); err != nil {
			return g.bodyError(ctx, refuse(rpcerr.ParseError, "parse_error", err.Error()))
		}
		if len(batch) == 0 {
			return g.bodyError(ctx, refuse(rpcerr.InvalidRequest, "empty_batch", "an empty batch array is not a request (JSON-RPC 2.0 §6)"))
		}
		// ACS §3: each request of a batch is evaluated independently, in
		// declared order.
		var out bytes.Buffer
		out.WriteByte('[')
		for i, raw := range batch {
			if i > 0 {
				out.WriteByte(',')
			}
			out.Write(g.serveOne(ctx, raw, nil, transport))
		}
		out.WriteByte(']')
		return out.Bytes()
	}
	return g.serveOne(ctx, trimmed, canon, transport)
}

// bodyError answers a body that holds no request at all.
func (g *Guardian) bodyError(ctx context.Context, e *rpcerr.Error) []byte {
	ctx, span := startRequest(ctx)
	start := time.Now()
	out := g.errorResponse(nullID, e, nil)
	observe(ctx, span, "", time.Since(start).Seconds(), out)
	span.End()
	return out
}

// serveOne answers one request object. canon is its RFC 8785 form, or nil
// when the caller has none at hand.
func (g *Guardian) serveOne(ctx context.Context, raw, canon []byte, transport string) (answer []byte) {
	ctx, span := startRequest(ctx)
	start := time.Now()
	method := ""
	defer func() {
		observe(ctx, span, method, time.Since(start).Seconds(), answer)
		span.End()
	}()
	req, rerr := g.parse(raw)
	if rerr == nil && canon != nil {
		req.canonParams = acs.CanonicalMember(canon, "params")
	}
	if req != nil {
		method = req.method
		if req.requestID != "" {
			span.SetAttributes(attrRequestID.String(req.requestID))
		}
	}
	if rerr != nil {
		id := nullID
		if req != nil {
			id = req.id
		}
		// Nothing about the request is authenticated yet.
		return g.errorResponse(id, rerr, nil)
	}
	switch req.spec.kind {
	case kindPing:
		return g.ping(req)
	case kindHello:
		return g.hello(ctx, req, transport)
	case kindReceipt:
		return g.receipt(ctx, req)
	default:
		return g.step(ctx, req)
	}
}

// parse checks a request object against the JSON-RPC 2.0 and ACS envelope
// rules. It returns the request as far as it could be read (for its id)
// and the refusal, if any.
func (g *Guardian) parse(raw []byte) (*request, *rpcerr.Error) {
	top, err := members(raw)
	if err != nil {
		return nil, refuse(rpcerr.InvalidRequest, "not_a_request", "a request must be a JSON object")
	}
	req := &request{id: nullID, raw: raw}
	idRaw, ok := top["id"]
	if !ok {
		return req, refuse(rpcerr.InvalidRequest, "notification", "id is missing: notifications are not supported in ACS v0.1 (§3), every request needs an id")
	}
	switch kindOf(idRaw) {
	case "string", "number":
		req.id = idRaw
	default:
		return req, refuse(rpcerr.InvalidRequest, "invalid_id", "id must be a string or a number")
	}
	if v, ok := top["jsonrpc"]; !ok || string(v) != `"2.0"` {
		return req, refuse(rpcerr.InvalidRequest, "invalid_jsonrpc", `jsonrpc must be the string "2.0"`)
	}
	mRaw, ok := top["method"]
	if !ok || kindOf(mRaw) != "string" {
		return req, refuse(rpcerr.InvalidRequest, "invalid_method", "method must be a string")
	}
	_ = json.Unmarshal(mRaw, &req.method)
	for k := range top {
		switch k {
		case "jsonrpc", "id", "method", "params":
		default:
			return req, refuse(rpcerr.InvalidRequest, "unknown_member", fmt.Sprintf("the request has a member %q; a request envelope has only jsonrpc, id, method and params", k))
		}
	}
	spec, ok := lookupMethod(req.method)
	if !ok {
		return req, refuse(rpcerr.MethodNotFound, "method_not_found", methodNotFoundMessage(req.method), "method", req.method)
	}
	req.spec = spec
	pRaw, ok := top["params"]
	if !ok {
		return req, refuse(rpcerr.InvalidParams, "missing_params", "params is missing; every ACS request carries params")
	}
	req.params = pRaw
	if e := req.readParams(); e != nil {
		return req, e
	}
	doc, e := validateRequest(raw, req.method)
	if e != nil {
		return req, e
	}
	req.paramsDoc = doc
	return req, nil
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// paramsValue is params decoded: paramsDoc, or params decoded now when the
// request was read without it.
func (req *request) paramsValue() any {
	if req.paramsDoc != nil {
		return req.paramsDoc
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(req.params))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return nil
	}
	return v
}

// readParams reads the AcsParams members the Guardian acts on, naming the
// field of the first one that is missing or of the wrong type.
func (req *request) readParams() *rpcerr.Error {
	p, err := members(req.params)
	if err != nil {
		return invalidParam("params", "must be an object")
	}
	var e *rpcerr.Error
	str := func(m map[string]json.RawMessage, key, where string, required bool) string {
		v, ok := m[key]
		if e != nil {
			return ""
		}
		if !ok {
			if required {
				e = invalidParam(where, "is required")
			}
			return ""
		}
		if kindOf(v) != "string" {
			e = invalidParam(where, "must be a string")
			return ""
		}
		var s string
		_ = json.Unmarshal(v, &s)
		return s
	}
	req.acsVersion = str(p, "acs_version", "params.acs_version", true)
	req.requestID = str(p, "request_id", "params.request_id", true)
	ts := str(p, "timestamp", "params.timestamp", true)
	req.nonce = str(p, "nonce", "params.nonce", false)
	if e != nil {
		return e
	}
	if !semverRE.MatchString(req.acsVersion) {
		return invalidParam("params.acs_version", fmt.Sprintf("%q is not a version X.Y.Z", req.acsVersion))
	}
	if !uuidRE.MatchString(req.requestID) {
		return invalidParam("params.request_id", fmt.Sprintf("%q is not a UUID", req.requestID))
	}
	t, terr := time.Parse(time.RFC3339Nano, ts)
	if terr != nil {
		return invalidParam("params.timestamp", fmt.Sprintf("%q is not an RFC 3339 date-time", ts))
	}
	req.timestamp = t
	if _, ok := p["nonce"]; ok && (len(req.nonce) < 16 || len(req.nonce) > 64) {
		return invalidParam("params.nonce", fmt.Sprintf("must be 16 to 64 characters long, not %d", len(req.nonce)))
	}
	mdRaw, ok := p["metadata"]
	if !ok {
		return invalidParam("params.metadata", "is required")
	}
	md, err := members(mdRaw)
	if err != nil {
		return invalidParam("params.metadata", "must be an object")
	}
	req.agentID = str(md, "agent_id", "params.metadata.agent_id", true)
	req.sessionID = str(md, "session_id", "params.metadata.session_id", true)
	req.turnID = str(md, "turn_id", "params.metadata.turn_id", false)
	if e != nil {
		return e
	}
	if !uuidRE.MatchString(req.sessionID) {
		return invalidParam("params.metadata.session_id", fmt.Sprintf("%q is not a UUID", req.sessionID))
	}
	if ssRaw, ok := md["session_state"]; ok {
		ss, err := members(ssRaw)
		if err != nil {
			return invalidParam("params.metadata.session_state", "must be an object")
		}
		req.clientHead = str(ss, "chain_hash", "params.metadata.session_state.chain_hash", false)
		if e != nil {
			return e
		}
	}
	pl, ok := p["payload"]
	if !ok {
		return invalidParam("params.payload", "is required")
	}
	if kindOf(pl) != "object" {
		return invalidParam("params.payload", "must be an object")
	}
	req.payload = pl
	if sv, ok := p["signature"]; ok {
		if kindOf(sv) != "object" {
			return invalidParam("params.signature", "must be an object")
		}
		req.signed = true
	}
	return nil
}

var semverRE = regexp.MustCompile(`^\d+\.\d+\.\d+$`)

func invalidParam(field, problem string) *rpcerr.Error {
	return refuse(rpcerr.InvalidParams, "invalid_params", field+" "+problem, "field", field)
}

// compatible reports whether version v can be spoken with this Guardian:
// ACS §3 accepts X.Y.Z matching the major version; for major 0 we also
// require the minor to match, since 0.x minors break compatibility under
// semantic versioning (docs/guardian.md).
func compatible(v string) bool {
	have := strings.SplitN(Version, ".", 3)
	got := strings.SplitN(v, ".", 3)
	if len(got) != 3 || got[0] != have[0] {
		return false
	}
	return have[0] != "0" || got[1] == have[1]
}

// members decodes a JSON object into its members. The body already passed
// the canonicalizer, so member names are unique.
func members(raw []byte) (map[string]json.RawMessage, error) {
	if kindOf(raw) != "object" {
		return nil, errors.New("not an object")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// kindOf names the JSON type of a value ("object", "string", ... as
// acs.JSONKind), or "" if it is empty.
func kindOf(raw []byte) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return ""
	}
	return acs.JSONKind(raw[0])
}

// errorResponse builds a signed error response. signer may be nil, in
// which case the ResponseKey signs, or nothing if there is none.
func (g *Guardian) errorResponse(id json.RawMessage, e *rpcerr.Error, signer sig.Signer) []byte {
	return g.seal(response{JSONRPC: "2.0", ID: id, Error: e}, sig.ErrorMember, signer)
}

// seal encodes and signs a response. A response that cannot be signed is
// never sent as if it were: seal falls back to an unsigned internal error.
func (g *Guardian) seal(r response, m sig.Member, signer sig.Signer) []byte {
	if signer == nil {
		signer = g.defaultSigner()
	}
	b, err := json.Marshal(r)
	if err != nil {
		g.cfg.Logger.Error("guardian: couldn't encode response", "err", err)
		return []byte(`{"error":{"code":-32603,"message":"Internal error"},"id":null,"jsonrpc":"2.0"}`)
	}
	if signer == nil {
		out, err := acs.Canonicalize(b)
		if err != nil {
			return b
		}
		return out
	}
	out, err := sig.SignEnvelope(b, m, signer)
	if err != nil {
		g.cfg.Logger.Error("guardian: couldn't sign response", "err", err)
		return []byte(`{"error":{"code":-32603,"message":"Internal error"},"id":null,"jsonrpc":"2.0"}`)
	}
	return out
}

// defaultSigner signs what belongs to no session: the ResponseKey.
func (g *Guardian) defaultSigner() sig.Signer {
	if g.cfg.ResponseKey == nil {
		return nil
	}
	s, err := g.cfg.ResponseKey.Signer("")
	if err != nil {
		return nil
	}
	return s
}

// sessionSigner returns the signer of the session a request names, if the
// Guardian knows it.
func (g *Guardian) sessionSigner(req *request) sig.Signer {
	if req == nil || req.sessionID == "" {
		return nil
	}
	if s := g.session(req.sessionID); s != nil {
		return s.signer
	}
	return nil
}
