package ingest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ingest/schemas"
	"github.com/acsledger/acsledger/ledger"
)

// DefaultA2HWindow is the A2H replay window (spec §9.2: a t outside ±120 s
// of the receiver's clock is refused).
const DefaultA2HWindow = 120 * time.Second

// SignatureHeader is the header carrying the Hub's signature (spec §9.2).
const SignatureHeader = "A2H-Signature"

// A2HKey is one key a Hub may sign responses with: an HMAC-SHA256 secret
// or an Ed25519 public key. The header names no key, so each is tried.
type A2HKey struct {
	ID      string
	HMAC    []byte
	Ed25519 ed25519.PublicKey
}

// A2HDelivery is one push of a Response, as received: the archived form is
// a JSONL line {"received_at", "callback_url", "headers", "body"}.
type A2HDelivery struct {
	ReceivedAt  string            `json:"received_at"`
	CallbackURL string            `json:"callback_url"`
	Headers     map[string]string `json:"headers"`
	Body        string            `json:"body"`
}

// a2hResponse holds the members of a Response the checks read. Response
// and State stay raw: payload_sha256 is computed over them as received.
type a2hResponse struct {
	Version      string          `json:"a2h_version"`
	InReplyTo    string          `json:"in_reply_to"`
	ResolutionID string          `json:"resolution_id"`
	Resolution   string          `json:"resolution"`
	Defaulted    *bool           `json:"defaulted"`
	Response     json.RawMessage `json:"response"`
	State        json.RawMessage `json:"state"`
	Agent        struct {
		ID    string `json:"id"`
		RunID string `json:"run_id"`
	} `json:"agent"`
}

// a2hSignature is a parsed A2H-Signature header.
type a2hSignature struct {
	T   int64
	TS  string // t exactly as sent, as signed_context carries it
	JTI string
	V1  []byte
}

// a2hFailure is a failed A2H check, with its reason code.
type a2hFailure struct {
	reason string
	err    error
}

func (f *a2hFailure) Error() string { return f.err.Error() }

func fail(reason, format string, args ...any) *a2hFailure {
	return &a2hFailure{reason: reason, err: fmt.Errorf(format, args...)}
}

// expiryActor is the actor of an expiry-defaulted Response (spec §6).
const expiryActor = "system:default_on_expire"

// A2HVerifier checks pushed Responses (spec §6, §9.2).
type A2HVerifier struct {
	Keys []A2HKey
	// Window is the replay window; 0 means DefaultA2HWindow.
	Window time.Duration
}

// a2hChecked is a Response that passed check.
type a2hChecked struct {
	resp      a2hResponse
	sig       a2hSignature
	keyID     string
	actor     string
	resolved  string
	signedCtx []byte
}

// check checks a delivery as of its received_at against its
// callback_url: the header's syntax, the body's JSON and version, the
// defaulted rule, the schema, the timestamp window and the signature over
// the JCS signed_context, in that order; the first failure is returned
// with its reason code. The jti replay and the (in_reply_to,
// resolution_id) dedupe are the store's (they need history).
func (v A2HVerifier) check(d A2HDelivery) (*a2hChecked, *a2hFailure) {
	received, err := time.Parse(time.RFC3339Nano, d.ReceivedAt)
	if err != nil {
		return nil, fail(ReasonSchemaInvalid, "received_at %q is not RFC 3339", d.ReceivedAt)
	}
	header, ok := headerValue(d.Headers, SignatureHeader)
	if !ok {
		return nil, fail(ReasonMalformedSigHdr, "no %s header", SignatureHeader)
	}
	sig, err := parseA2HSignature(header)
	if err != nil {
		return nil, fail(ReasonMalformedSigHdr, "%s: %v", SignatureHeader, err)
	}
	body := []byte(d.Body)
	if _, err := acs.Canonicalize(body); err != nil {
		return nil, fail(ReasonMalformedJSON, "body: %v", err)
	}
	var resp a2hResponse
	if firstByte(body) != '{' || json.Unmarshal(body, &resp) != nil {
		return nil, fail(ReasonSchemaInvalid, "the body is not an A2H Response object")
	}
	var schema string
	switch resp.Version {
	case "0.2":
		schema = schemas.A2HResponseV02
	case "0.3":
		schema = schemas.A2HResponseV03
	default:
		return nil, fail(ReasonUnsupportedVer, "a2h_version %q is not 0.2 or 0.3", resp.Version)
	}
	var detail struct {
		Actor      *string `json:"actor"`
		ResolvedAt *string `json:"resolved_at"`
	}
	if len(resp.Response) > 0 && firstByte(resp.Response) == '{' {
		_ = json.Unmarshal(resp.Response, &detail)
	}
	// Spec §6: an expiry-defaulted Response carries the system actor,
	// never a human one.
	if resp.Defaulted != nil && *resp.Defaulted && (detail.Actor == nil || *detail.Actor != expiryActor) {
		actor := "no actor"
		if detail.Actor != nil {
			actor = strconv.Quote(*detail.Actor)
		}
		return nil, fail(ReasonDefaultedActor, "defaulted is true but the actor is %s, not %s", actor, expiryActor)
	}
	// Spec §6 (v0.2 and v0.3): an expiry default resolves "expired". The
	// actor says what the Response is, whatever defaulted says (v0.3 §9.2:
	// defaulted is not bound, the actor is), so the system's actor on any
	// other resolution is a contradiction, not an answer.
	if detail.Actor != nil && *detail.Actor == expiryActor && resp.Resolution != "expired" {
		return nil, fail(ReasonExpiryDefaultResolution, "the actor is %s but the resolution is %q, not \"expired\"", expiryActor, resp.Resolution)
	}
	doc, err := schemas.Decode(body)
	if err != nil {
		return nil, fail(ReasonMalformedJSON, "body: %v", err)
	}
	if err := schemas.Validate(schema, doc); err != nil {
		return nil, fail(ReasonSchemaInvalid, "%v", err)
	}
	// Spec §6: response is REQUIRED for an ask, and "answered" is a
	// resolution only an ask has. The schema leaves response optional
	// because a task may omit it.
	if resp.Resolution == "answered" && len(resp.Response) == 0 {
		return nil, fail(ReasonSchemaInvalid, "resolution \"answered\" (an ask) without a response (spec §6: response is required for an ask)")
	}
	window := v.Window
	if window <= 0 {
		window = DefaultA2HWindow
	}
	if skew := received.Sub(time.Unix(sig.T, 0)); skew > window || skew < -window {
		return nil, fail(ReasonStaleTimestamp, "t=%d is %s away from received_at %s, outside the %s window", sig.T, skew.Round(time.Second), d.ReceivedAt, window)
	}
	signed, err := signedContext(resp, sig, d.CallbackURL, detail.ResolvedAt)
	if err != nil {
		return nil, fail(ReasonMalformedJSON, "%v", err)
	}
	keyID, ok := v.verifySig(signed, sig.V1)
	if !ok {
		return nil, fail(ReasonSignatureMismatch, "the signature verifies under none of the %d configured keys", len(v.Keys))
	}
	c := &a2hChecked{resp: resp, sig: sig, keyID: keyID, signedCtx: signed}
	if detail.Actor != nil {
		c.actor = *detail.Actor
	}
	if detail.ResolvedAt != nil {
		c.resolved = *detail.ResolvedAt
	}
	return c, nil
}

// expiryDefault reports whether the Response resolved by expiry default:
// its actor is the system's and its resolution "expired" (spec §6). It is
// derived from what the signature binds (v0.3: the actor through
// payload_sha256, the resolution directly), never from the top-level
// defaulted, which no version binds; check has refused a defaulted that
// contradicts them.
func (c *a2hChecked) expiryDefault() bool {
	return c.actor == expiryActor && c.resp.Resolution == "expired"
}

func (v A2HVerifier) verifySig(msg, sig []byte) (string, bool) {
	for _, k := range v.Keys {
		switch {
		case k.HMAC != nil:
			mac := hmac.New(sha256.New, k.HMAC)
			mac.Write(msg)
			if hmac.Equal(mac.Sum(nil), sig) {
				return k.ID, true
			}
		case k.Ed25519 != nil:
			if len(sig) == ed25519.SignatureSize && ed25519.Verify(k.Ed25519, msg, sig) {
				return k.ID, true
			}
		}
	}
	return "", false
}

// signedContext rebuilds the JCS signed_context of spec §9.2. id is the
// message id, which a Response carries as in_reply_to. v0.3 adds
// payload_sha256, recomputed from the body as received, never taken from
// the sender. resolved_at is the response's; a Response without one (a
// task without comment) signs none.
func signedContext(resp a2hResponse, sig a2hSignature, callbackURL string, resolvedAt *string) ([]byte, error) {
	sc := map[string]string{
		"a2h_version": resp.Version, "callback_url": callbackURL, "id": resp.InReplyTo,
		"in_reply_to": resp.InReplyTo, "jti": sig.JTI, "resolution": resp.Resolution,
		"resolution_id": resp.ResolutionID, "t": sig.TS,
	}
	if resolvedAt != nil {
		sc["resolved_at"] = *resolvedAt
	}
	if resp.Version != "0.2" {
		sum, err := PayloadSHA256(resp.Response, resp.State)
		if err != nil {
			return nil, err
		}
		sc["payload_sha256"] = sum
	}
	b, err := json.Marshal(sc)
	if err != nil {
		return nil, err
	}
	return acs.Canonicalize(b)
}

// PayloadSHA256 is the v0.3 payload digest (spec §9.2): lowercase hex
// SHA-256 of JCS({"response": response or null, "state": state or null}).
func PayloadSHA256(response, state json.RawMessage) (string, error) {
	orNull := func(b json.RawMessage) []byte {
		if len(b) == 0 {
			return []byte("null")
		}
		return b
	}
	var buf bytes.Buffer
	buf.WriteString(`{"response":`)
	buf.Write(orNull(response))
	buf.WriteString(`,"state":`)
	buf.Write(orNull(state))
	buf.WriteString(`}`)
	c, err := acs.Canonicalize(buf.Bytes())
	if err != nil {
		return "", fmt.Errorf("couldn't canonicalize the payload: %w", err)
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// parseA2HSignature parses "t=<unix>,jti=<nonce>,v1=<base64url>": each
// member once, nothing else.
func parseA2HSignature(h string) (a2hSignature, error) {
	var s a2hSignature
	seen := map[string]bool{}
	for _, part := range strings.Split(h, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || v == "" {
			return s, fmt.Errorf("%q is not key=value", part)
		}
		if seen[k] {
			return s, fmt.Errorf("%s appears twice", k)
		}
		seen[k] = true
		switch k {
		case "t":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || strings.TrimLeft(v, "0123456789") != "" {
				return s, fmt.Errorf("t=%q is not a Unix time", v)
			}
			s.T, s.TS = n, v
		case "jti":
			s.JTI = v
		case "v1":
			b, err := base64.RawURLEncoding.Strict().DecodeString(v)
			if err != nil {
				return s, fmt.Errorf("v1 is not unpadded base64url: %v", err)
			}
			s.V1 = b
		default:
			return s, fmt.Errorf("unknown member %q", k)
		}
	}
	for _, k := range []string{"t", "jti", "v1"} {
		if !seen[k] {
			return s, fmt.Errorf("no %s", k)
		}
	}
	return s, nil
}

func headerValue(h map[string]string, name string) (string, bool) {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// allowedResolutions are the terminal values per message type (spec §6).
var allowedResolutions = map[string][]string{
	"ask":    {"answered", "declined", "cancelled", "expired"},
	"task":   {"completed", "dismissed", "expired"},
	"notify": {},
}

// A2HMapper maps A2H deliveries. An accepted Response that answers an ASK
// entry of the ledger (an entry whose step_id is the Response's
// in_reply_to and whose decision is "ask") is chained into that entry's
// session and names it (answers); any other goes to session "a2h:" +
// in_reply_to.
type A2HMapper struct {
	Verifier A2HVerifier
	Store    Store
	// MessageTypes gives the type (ask, task, notify) of A2H messages by
	// id, when known; ASK entries of the ledger are known as "ask".
	MessageTypes map[string]string
}

// a2hEntry is the ContextEntry of an accepted Response.
type a2hEntry struct {
	EntryID    string        `json:"entry_id"`
	StepID     string        `json:"step_id"`
	StepType   string        `json:"step_type"`
	Timestamp  string        `json:"timestamp"`
	Resolution a2hResolution `json:"resolution"`
	Answers    *entryRef     `json:"answers,omitempty"`
	Flags      []string      `json:"flags,omitempty"`
	sourceRef
}

type a2hResolution struct {
	Version      string `json:"a2h_version"`
	InReplyTo    string `json:"in_reply_to"`
	ResolutionID string `json:"resolution_id"`
	Resolution   string `json:"resolution"`
	Defaulted    bool   `json:"defaulted"`
	Actor        string `json:"actor,omitempty"`
	ResolvedAt   string `json:"resolved_at,omitempty"`
	MessageType  string `json:"message_type,omitempty"`
	JTI          string `json:"jti"`
	T            string `json:"t"`
	KeyID        string `json:"key_id"`
	CallbackURL  string `json:"callback_url"`
	AgentID      string `json:"agent_id,omitempty"`
	RunID        string `json:"run_id,omitempty"`
}

// A2HKeyOf returns the natural key of a Response: (in_reply_to,
// resolution_id) as a JSON array, which no pair of ids shares.
func A2HKeyOf(inReplyTo, resolutionID string) string {
	return naturalKey(inReplyTo, resolutionID)
}

// Map implements Mapper.
func (m A2HMapper) Map(ctx context.Context, raw Raw) ledger.IngestRecord {
	var d A2HDelivery
	if q := decodeRecord(A2H, raw, &d, "not an archived delivery {received_at, callback_url, headers, body}"); q != nil {
		return *q
	}
	c, f := m.Verifier.check(d)
	if f != nil {
		key := ""
		var resp a2hResponse
		if json.Unmarshal([]byte(d.Body), &resp) == nil && resp.InReplyTo != "" && resp.ResolutionID != "" {
			key = A2HKeyOf(resp.InReplyTo, resp.ResolutionID)
		}
		return quarantine(A2H, raw, key, f.reason, "%v", f.err)
	}
	r := c.resp
	key := A2HKeyOf(r.InReplyTo, r.ResolutionID)
	session := "a2h:" + r.InReplyTo
	msgType := m.MessageTypes[r.InReplyTo]
	var answers *entryRef
	writer := ledger.WriterExternal
	if m.Store != nil {
		ask, err := m.askEntry(ctx, r.InReplyTo)
		if err != nil {
			return quarantine(A2H, raw, key, ReasonSchemaInvalid, "couldn't look up message %s: %v", r.InReplyTo, err)
		}
		if ask != nil {
			session, msgType = ask.SessionID, "ask"
			answers = &entryRef{SessionID: ask.SessionID, Position: ask.Position, EntryHash: ask.EntryHash.String()}
			// The resolution is chained beside the ASK it answers, as the
			// writer of that session: a Guardian's ASK is answered in the
			// Guardian's session (docs/ingest.md, "A2H").
			se, err := m.Store.Session(ctx, ask.SessionID)
			if err != nil {
				return quarantine(A2H, raw, key, ReasonSchemaInvalid, "couldn't read session %s of message %s: %v", ask.SessionID, r.InReplyTo, err)
			}
			writer = se.Writer
		}
	}
	if allowed, known := allowedResolutions[msgType]; known && !contains(allowed, r.Resolution) {
		return quarantine(A2H, raw, key, ReasonResolutionType, "resolution %q does not answer a %s message (allowed: %s)", r.Resolution, msgType, strings.Join(allowed, ", "))
	}
	var flags []string
	if r.Version == "0.2" {
		// v0.2's signed_context binds no payload digest (spec §9.2, added
		// in v0.3): the response (its value, actor, comment) and the state
		// are unsigned, and whoever relayed the push could have changed
		// them. The entry keeps them, and says so.
		flags = []string{FlagUnboundPayload}
	}
	entry, err := json.Marshal(a2hEntry{
		EntryID: "a2h:" + r.InReplyTo + ":" + r.ResolutionID, StepID: "a2h:" + r.InReplyTo + ":" + r.ResolutionID,
		StepType: "ingest/a2h/resolution", Timestamp: d.ReceivedAt,
		Resolution: a2hResolution{
			Version: r.Version, InReplyTo: r.InReplyTo, ResolutionID: r.ResolutionID, Resolution: r.Resolution,
			Defaulted: c.expiryDefault(), Actor: c.actor, ResolvedAt: c.resolved, MessageType: msgType,
			JTI: c.sig.JTI, T: c.sig.TS, KeyID: c.keyID, CallbackURL: d.CallbackURL, AgentID: r.Agent.ID, RunID: r.Agent.RunID,
		},
		Answers: answers, Flags: flags, sourceRef: newSourceRef(A2H, key, raw),
	})
	if err != nil {
		return quarantine(A2H, raw, key, ReasonSchemaInvalid, "%v", err)
	}
	return ledger.IngestRecord{
		Source: string(A2H), Key: key, ReplayKey: c.sig.JTI,
		// A Hub's redelivery carries a new t and jti but the same body: the
		// body is what identifies the content.
		Digest: sha256.Sum256([]byte(d.Body)),
		File:   raw.File, Record: raw.Record, Raw: raw.Bytes, KeepSource: true, Flags: flags,
		Entry: ledger.Record{SessionID: session, Entry: entry, Writer: writer},
	}
}

// askEntry returns the ledger's ASK entry whose step_id is id, or nil.
func (m A2HMapper) askEntry(ctx context.Context, id string) (*ledger.Entry, error) {
	es, err := m.Store.EntriesByStep(ctx, id, "")
	if err != nil {
		return nil, err
	}
	if len(es) != 1 {
		return nil, nil // none, or ambiguous across sessions
	}
	var e struct {
		Decision struct {
			Disposition string `json:"disposition"`
		} `json:"decision"`
	}
	if json.Unmarshal(es[0].Content, &e) != nil || !strings.EqualFold(e.Decision.Disposition, "ask") {
		return nil, nil
	}
	return &es[0], nil
}

func contains(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

// DeliveryLine returns the archived-delivery JSONL line of a live push,
// so a pushed Response is mapped and stored as an archived one would be.
func DeliveryLine(receivedAt time.Time, callbackURL, signature string, body []byte) ([]byte, error) {
	if !json.Valid(body) {
		// Kept as text either way; the check reports malformed_json.
		body = bytes.ToValidUTF8(body, []byte("\uFFFD"))
	}
	b, err := json.Marshal(A2HDelivery{
		ReceivedAt: receivedAt.UTC().Format(time.RFC3339Nano), CallbackURL: callbackURL,
		Headers: map[string]string{SignatureHeader: signature}, Body: string(body),
	})
	if err != nil {
		return nil, errors.New("couldn't encode the delivery")
	}
	return b, nil
}
