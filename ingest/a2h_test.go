package ingest

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ingest/schemas"
)

// vector is an A2H conformance vector (testdata/a2h, spec §12).
type vector struct {
	ID            string          `json:"id"`
	Class         string          `json:"class"`
	Target        string          `json:"target"`
	Input         json.RawMessage `json:"input"`
	Expect        string          `json:"expect"`
	TestKey       string          `json:"test_key"`
	Payload       *a2hPayload     `json:"payload"`
	SignedContext map[string]any  `json:"signed_context"`
	CanonicalJCS  string          `json:"canonical_jcs"`
	Header        string          `json:"header"`
	V1            string          `json:"v1"`
	Honest        *a2hPayload     `json:"honest_payload"`
	Tampered      *a2hPayload     `json:"tampered_payload"`
	PayloadJCS    string          `json:"payload_canonical_jcs"`
	PayloadSHA256 string          `json:"payload_sha256"`
}

type a2hPayload struct {
	Response json.RawMessage `json:"response"`
	State    json.RawMessage `json:"state"`
}

// hubOnly are the vectors whose obligations only a Hub can discharge
// (request-leg auth, prose audits): nothing a receiver checks.
var hubOnly = map[string]string{
	"dp-002-cancel-submitter-binding": "binds poll/cancel access to the submitting agent, a Hub duty",
	"pa-001-prose-audits":             "prose audits of the spec text, a human sign-off",
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	files, err := filepath.Glob("testdata/a2h/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	var vs []vector
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v vector
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		vs = append(vs, v)
	}
	return vs
}

// deliveryFor builds the archived delivery of a v0.3 Response answering
// the dp-001 fixture, with payload p, as the Hub pushed it.
func deliveryFor(t *testing.T, v vector, p *a2hPayload, header string, received time.Time) A2HDelivery {
	t.Helper()
	sc := v.SignedContext
	body, err := json.Marshal(map[string]any{
		"a2h_version": sc["a2h_version"], "in_reply_to": sc["in_reply_to"], "resolution_id": sc["resolution_id"],
		"agent": map[string]string{"id": "deploybot/dev-team", "run_id": "run_1"}, "resolution": sc["resolution"],
		"response": p.Response, "state": p.State,
	})
	if err != nil {
		t.Fatal(err)
	}
	return A2HDelivery{
		ReceivedAt: received.UTC().Format(time.RFC3339), CallbackURL: sc["callback_url"].(string),
		Headers: map[string]string{SignatureHeader: header}, Body: string(body),
	}
}

// TestConformanceVectors runs every A2H conformance vector a receiver can
// check: the schema-validation vectors against the embedded v0.3
// schemas, and the signature and payload-digest fixtures through Verify.
func TestConformanceVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.ID, func(t *testing.T) {
			if why, ok := hubOnly[v.ID]; ok {
				if v.Class == "schema-validation" {
					t.Fatalf("%s is listed as Hub-only (%s) but is a schema vector", v.ID, why)
				}
				return
			}
			switch {
			case v.Class == "schema-validation":
				doc, err := schemas.Decode(v.Input)
				if err != nil {
					t.Fatal(err)
				}
				err = schemas.Validate("a2h/v0.3/"+v.Target, doc)
				if got := map[bool]string{true: "valid", false: "invalid"}[err == nil]; got != v.Expect {
					t.Fatalf("%s: %s, want %s (%v)", v.Target, got, v.Expect, err)
				}
			case v.ID == "dp-001-signature":
				testDP001(t, v)
			case v.ID == "dp-003-payload-tamper-invalid":
				tsec := v.SignedContext["t"].(string)
				header := fmt.Sprintf("t=%s,jti=%s,v1=%s", tsec, v.SignedContext["jti"], v.V1)
				at := unixString(t, tsec).Add(5 * time.Second)
				ver := A2HVerifier{Keys: []A2HKey{{ID: "test", HMAC: []byte(v.TestKey)}}}
				if _, f := ver.check(deliveryFor(t, v, v.Honest, header, at)); f != nil {
					t.Fatalf("the honest payload fails: %v", f)
				}
				_, f := ver.check(deliveryFor(t, v, v.Tampered, header, at))
				if f == nil || f.reason != ReasonSignatureMismatch {
					t.Fatalf("the tampered payload: %v, want %s", f, ReasonSignatureMismatch)
				}
			case v.ID == "dp-004-numeric-payload":
				sum, err := PayloadSHA256(v.Payload.Response, v.Payload.State)
				if err != nil {
					t.Fatal(err)
				}
				c, _ := acs.Canonicalize(fmt.Appendf(nil, `{"response":%s,"state":%s}`, v.Payload.Response, v.Payload.State))
				if string(c) != v.PayloadJCS || sum != v.PayloadSHA256 {
					t.Fatalf("payload JCS %s\nwant        %s\ndigest %s, want %s", c, v.PayloadJCS, sum, v.PayloadSHA256)
				}
			default:
				t.Fatalf("vector %s (%s) is not handled by this test", v.ID, v.Class)
			}
		})
	}
}

func unixString(t *testing.T, s string) time.Time {
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return time.Unix(n, 0)
}

func testDP001(t *testing.T, v vector) {
	sum, err := PayloadSHA256(v.Payload.Response, v.Payload.State)
	if err != nil {
		t.Fatal(err)
	}
	if sum != v.SignedContext["payload_sha256"] {
		t.Fatalf("payload_sha256 %s, want %s", sum, v.SignedContext["payload_sha256"])
	}
	header := strings.TrimPrefix(v.Header, SignatureHeader+": ")
	sig, err := parseA2HSignature(header)
	if err != nil {
		t.Fatal(err)
	}
	var resp a2hResponse
	d := deliveryFor(t, v, v.Payload, header, unixString(t, sig.TS).Add(-30*time.Second))
	if err := json.Unmarshal([]byte(d.Body), &resp); err != nil {
		t.Fatal(err)
	}
	resolved := v.SignedContext["resolved_at"].(string)
	signed, err := signedContext(resp, sig, d.CallbackURL, &resolved)
	if err != nil {
		t.Fatal(err)
	}
	if string(signed) != v.CanonicalJCS {
		t.Fatalf("signed_context\n%s\nwant\n%s", signed, v.CanonicalJCS)
	}
	mac := hmac.New(sha256.New, []byte(v.TestKey))
	mac.Write(signed)
	if got := base64.RawURLEncoding.EncodeToString(mac.Sum(nil)); got != v.V1 {
		t.Fatalf("v1 %s, want %s", got, v.V1)
	}
	ver := A2HVerifier{Keys: []A2HKey{{ID: "other", HMAC: []byte("another secret")}, {ID: "test", HMAC: []byte(v.TestKey)}}}
	c, f := ver.check(d)
	if f != nil {
		t.Fatalf("check: %v", f)
	}
	if c.keyID != "test" || c.actor != "human:alice" {
		t.Fatalf("verified as %+v", c)
	}
	// A tampered signed member fails: the resolution_id, here.
	d2 := d
	d2.Body = strings.Replace(d.Body, "res_01HZXR3SOLVE", "res_01HZXR3SOLVF", 1)
	if _, f := ver.check(d2); f == nil || f.reason != ReasonSignatureMismatch {
		t.Fatalf("tampered resolution_id: %v", f)
	}
	// Outside the ±120 s window.
	d3 := d
	d3.ReceivedAt = unixString(t, sig.TS).Add(121 * time.Second).UTC().Format(time.RFC3339)
	if _, f := ver.check(d3); f == nil || f.reason != ReasonStaleTimestamp {
		t.Fatalf("stale: %v", f)
	}
}

// hubSign signs body as a Hub does (spec §9.2), with an HMAC secret or an
// Ed25519 private key, and returns the A2H-Signature header value.
func hubSign(t *testing.T, body []byte, callback string, at time.Time, jti string, hmacKey []byte, edKey ed25519.PrivateKey) string {
	t.Helper()
	var resp a2hResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	var detail struct {
		ResolvedAt *string `json:"resolved_at"`
	}
	_ = json.Unmarshal(resp.Response, &detail)
	ts := fmt.Sprint(at.Unix())
	signed, err := signedContext(resp, a2hSignature{JTI: jti, TS: ts}, callback, detail.ResolvedAt)
	if err != nil {
		t.Fatal(err)
	}
	var s []byte
	if edKey != nil {
		s = ed25519.Sign(edKey, signed)
	} else {
		m := hmac.New(sha256.New, hmacKey)
		m.Write(signed)
		s = m.Sum(nil)
	}
	return fmt.Sprintf("t=%s,jti=%s,v1=%s", ts, jti, base64.RawURLEncoding.EncodeToString(s))
}

func responseBody(version, inReplyTo, resID, resolution string, defaulted bool, actor string) []byte {
	m := map[string]any{
		"a2h_version": version, "in_reply_to": inReplyTo, "resolution_id": resID,
		"agent": map[string]string{"id": "bot", "run_id": "r1"}, "resolution": resolution,
		"response": map[string]any{"value": "ship", "actor": actor, "resolved_at": "2026-12-01T10:00:00Z"},
	}
	if defaulted {
		m["defaulted"] = true
	}
	b, _ := json.Marshal(m)
	return b
}

func TestA2HChecks(t *testing.T) {
	secret := []byte("hub secret")
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	ver := A2HVerifier{Keys: []A2HKey{{ID: "h", HMAC: secret}, {ID: "e", Ed25519: pub}}}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cb := "https://ledger.example/api/v1/ingest/a2h"
	deliver := func(body []byte, header string) A2HDelivery {
		return A2HDelivery{ReceivedAt: at.Add(3 * time.Second).Format(time.RFC3339), CallbackURL: cb, Headers: map[string]string{"a2h-signature": header}, Body: string(body)}
	}
	// signed is body as the Hub signs it with secret, jti a fresh nonce.
	signed := func(body []byte, jti string) A2HDelivery {
		return deliver(body, hubSign(t, body, cb, at, jti, secret, nil))
	}
	good := responseBody("0.3", "msg_1", "res_1", "answered", false, "human:alice")
	for _, tc := range []struct {
		name   string
		d      A2HDelivery
		reason string // "" accepted
		key    string
	}{
		{"hmac v0.3", signed(good, "j1"), "", "h"},
		{"ed25519 v0.3", deliver(good, hubSign(t, good, cb, at, "j2", nil, priv)), "", "e"},
		{"v0.2 signs no payload digest", signed(responseBody("0.2", "msg_1", "res_1", "answered", false, "human:alice"), "j3"), "", "h"},
		{"v0.2 payload is not bound", func() A2HDelivery {
			b := responseBody("0.2", "msg_1", "res_1", "answered", false, "human:alice")
			h := hubSign(t, b, cb, at, "j3", secret, nil)
			return deliver([]byte(strings.Replace(string(b), "ship", "hold", 1)), h)
		}(), "", "h"},
		{"v0.3 payload is bound", deliver([]byte(strings.Replace(string(good), "ship", "hold", 1)), hubSign(t, good, cb, at, "j4", secret, nil)), ReasonSignatureMismatch, ""},
		{"other callback url", deliver(good, hubSign(t, good, "https://evil.example/cb", at, "j5", secret, nil)), ReasonSignatureMismatch, ""},
		{"unknown key", deliver(good, hubSign(t, good, cb, at, "j6", []byte("nope"), nil)), ReasonSignatureMismatch, ""},
		{"stale", deliver(good, hubSign(t, good, cb, at.Add(-5*time.Minute), "j7", secret, nil)), ReasonStaleTimestamp, ""},
		{"no header", A2HDelivery{ReceivedAt: at.Format(time.RFC3339), CallbackURL: cb, Headers: map[string]string{}, Body: string(good)}, ReasonMalformedSigHdr, ""},
		{"header without jti", deliver(good, "t=1,v1=AAAA"), ReasonMalformedSigHdr, ""},
		{"header t twice", deliver(good, "t=1,t=2,jti=x,v1=AAAA"), ReasonMalformedSigHdr, ""},
		{"header v1 padded", deliver(good, "t=1,jti=x,v1=AA=="), ReasonMalformedSigHdr, ""},
		{"header t not a number", deliver(good, "t=+1,jti=x,v1=AAAA"), ReasonMalformedSigHdr, ""},
		{"body not JSON", deliver([]byte(`{"a2h_version":"0.3",`), "t=1,jti=x,v1=AAAA"), ReasonMalformedJSON, ""},
		{"duplicate member", deliver([]byte(`{"a2h_version":"0.3","a2h_version":"0.3"}`), "t=1,jti=x,v1=AAAA"), ReasonMalformedJSON, ""},
		{"version 0.4", signed(responseBody("0.4", "msg_1", "res_1", "answered", false, "human:alice"), "j8"), ReasonUnsupportedVer, ""},
		{"defaulted by a human", signed(responseBody("0.3", "msg_1", "res_1", "expired", true, "human:alice"), "j9"), ReasonDefaultedActor, ""},
		{"defaulted by the system", signed(responseBody("0.3", "msg_1", "res_1", "expired", true, "system:default_on_expire"), "j10"), "", "h"},
		{"schema: resolution ignored", signed(responseBody("0.3", "msg_1", "res_1", "ignored", false, "human:alice"), "j11"), ReasonSchemaInvalid, ""},
		{"schema: bad actor", signed(responseBody("0.3", "msg_1", "res_1", "answered", false, "alice"), "j12"), ReasonSchemaInvalid, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, f := ver.check(tc.d)
			switch {
			case tc.reason == "" && f != nil:
				t.Fatalf("refused: %s: %v", f.reason, f)
			case tc.reason != "" && (f == nil || f.reason != tc.reason):
				t.Fatalf("got %v, want %s", f, tc.reason)
			case tc.reason == "" && c.keyID != tc.key:
				t.Fatalf("verified with key %q, want %q", c.keyID, tc.key)
			}
		})
	}
}

func TestMember(t *testing.T) {
	obj := []byte(` { "a" : {"x":[1,{"y":"}"}]} , "s\"k":"v\\\"", "session_id" : "s-1", "n": -1.5e3 , "z":null}`)
	for _, tc := range []struct{ name, want string }{
		{"a", `{"x":[1,{"y":"}"}]}`}, {`s"k`, `"v\\\""`}, {"session_id", `"s-1"`}, {"n", `-1.5e3`}, {"z", "null"}, {"missing", ""},
	} {
		v, ok := member(obj, tc.name)
		if string(v) != tc.want || ok != (tc.want != "") {
			t.Errorf("member %q: %q %v, want %q", tc.name, v, ok, tc.want)
		}
	}
	if _, ok := member([]byte(`[1]`), "a"); ok {
		t.Error("member of an array")
	}
}

func TestDecodeOPAEvent(t *testing.T) {
	ev, err := decodeOPAEvent([]byte(` {"decision_id" : "d\u002d1", "input":{"a":[1,"}"]}, "result":null,"labels":{"id":"o"},"bundles":{"b":{"revision":"r"}},"erased":["/x"],"timestamp":"t","unknown":{"x":1}} `))
	if err != nil {
		t.Fatal(err)
	}
	if *ev.DecisionID != "d-1" || string(ev.Input) != `{"a":[1,"}"]}` || string(ev.Result) != "null" || ev.Labels["id"] != "o" ||
		ev.Bundles["b"].Revision != "r" || ev.Erased[0] != "/x" || *ev.Timestamp != "t" || ev.NDBuiltinCache != nil {
		t.Fatalf("%+v", ev)
	}
	for _, bad := range []string{`{"decision_id":1}`, `{"labels":["x"]}`, `[]`, `{"path":null}`} {
		if _, err := decodeOPAEvent([]byte(bad)); err == nil {
			t.Errorf("%s decoded", bad)
		}
	}
	if ev, err := decodeOPAEvent([]byte(`{}`)); err != nil || ev.DecisionID != nil {
		t.Fatalf("empty object: %+v, %v", ev, err)
	}
}

// TestOPAMapsDecodeAsEncodingJSON: labels and bundles, decoded without
// reflection, come out as encoding/json decodes them, and fail where it
// fails.
func TestOPAMapsDecodeAsEncodingJSON(t *testing.T) {
	for _, v := range []string{`null`, `{}`, `{"id":"o","v":"1.2"}`, `{"id":null}`, `{"a\u0041":"x\ny"}`, `{"id":1}`, `["x"]`, `"x"`, `{"id":{}}`} {
		var want map[string]string
		wantErr := json.Unmarshal([]byte(v), &want)
		got, err := stringMap([]byte(v))
		if (err != nil) != (wantErr != nil) || wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("labels %s: %#v, %v; encoding/json %#v, %v", v, got, err, want, wantErr)
		}
	}
	for _, v := range []string{`null`, `{}`, `{"authz":{"revision":"r1"},"b":{}}`, `{"a":null,"b":{"revision":null,"roots":["x"]}}`,
		`{"a":{"Revision":"r2"}}`, `{"a":{"revision":"r1","REVISION":"r3"}}`, `{"a":{"revision":1}}`, `{"a":"x"}`, `{"a":[]}`, `[]`} {
		var want map[string]opaBundle
		wantErr := json.Unmarshal([]byte(v), &want)
		got, err := opaBundles([]byte(v))
		if (err != nil) != (wantErr != nil) || wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("bundles %s: %#v, %v; encoding/json %#v, %v", v, got, err, want, wantErr)
		}
	}
}

// TestA2HBoundMeaning: what a resolution means comes from what the Hub
// signed, as spec §6 and v0.3 §9.2 say, and a v0.2 delivery, whose
// payload no signature covers, says so on its entry.
func TestA2HBoundMeaning(t *testing.T) {
	secret := []byte("hub secret")
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cb := "https://ledger.example/api/v1/ingest/a2h"
	m := A2HMapper{Verifier: A2HVerifier{Keys: []A2HKey{{ID: "h", HMAC: secret}}}}
	// body is a Response; defaulted is left out when nil, response when
	// actor is "".
	body := func(version, resolution string, defaulted *bool, actor string) []byte {
		r := map[string]any{
			"a2h_version": version, "in_reply_to": "msg_1", "resolution_id": "res_" + resolution,
			"agent": map[string]string{"id": "bot", "run_id": "r1"}, "resolution": resolution,
		}
		if actor != "" {
			r["response"] = map[string]any{"value": "hold", "actor": actor, "resolved_at": "2026-12-01T10:00:00Z"}
		}
		if defaulted != nil {
			r["defaulted"] = *defaulted
		}
		b, _ := json.Marshal(r)
		return b
	}
	no := false
	for i, tc := range []struct {
		name          string
		body          []byte
		reason        string // "" accepted
		expiryDefault bool
		flags         []string
	}{
		{"the system's actor answering", body("0.3", "answered", nil, expiryActor), ReasonExpiryDefaultResolution, false, nil},
		{"the system's actor answering, defaulted false", body("0.3", "answered", &no, expiryActor), ReasonExpiryDefaultResolution, false, nil},
		{"the system's actor declining, v0.2", body("0.2", "declined", nil, expiryActor), ReasonExpiryDefaultResolution, false, nil},
		{"an expiry default without defaulted", body("0.3", "expired", nil, expiryActor), "", true, nil},
		{"an expiry default, defaulted false", body("0.3", "expired", &no, expiryActor), "", true, nil},
		{"a human answer", body("0.3", "answered", nil, "human:alice"), "", false, nil},
		{"a human's expired ask", body("0.3", "expired", nil, "human:alice"), "", false, nil},
		{"answered without a response", body("0.3", "answered", nil, ""), ReasonSchemaInvalid, false, nil},
		{"answered without a response, v0.2", body("0.2", "answered", nil, ""), ReasonSchemaInvalid, false, nil},
		{"a task dismissed without a response", body("0.3", "dismissed", nil, ""), "", false, nil},
		{"v0.2 is flagged unbound", body("0.2", "answered", nil, "human:alice"), "", false, []string{FlagUnboundPayload}},
		{"a v0.2 expiry default is flagged unbound", body("0.2", "expired", nil, expiryActor), "", true, []string{FlagUnboundPayload}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jti := fmt.Sprintf("j%d", i)
			line, err := DeliveryLine(at.Add(3*time.Second), cb, hubSign(t, tc.body, cb, at, jti, secret, nil), tc.body)
			if err != nil {
				t.Fatal(err)
			}
			rec := m.Map(t.Context(), Raw{File: "a2h.jsonl", Record: 1, Bytes: line})
			if tc.reason != "" {
				if rec.Quarantine == nil || rec.Quarantine.Reason != tc.reason {
					t.Fatalf("got %+v, want quarantined %s", rec.Quarantine, tc.reason)
				}
				return
			}
			if rec.Quarantine != nil {
				t.Fatalf("quarantined: %+v", rec.Quarantine)
			}
			var e struct {
				Resolution struct {
					Defaulted *bool `json:"defaulted"`
				} `json:"resolution"`
				Flags []string `json:"flags"`
			}
			if err := json.Unmarshal(rec.Entry.Entry, &e); err != nil {
				t.Fatal(err)
			}
			if e.Resolution.Defaulted == nil || *e.Resolution.Defaulted != tc.expiryDefault {
				t.Errorf("entry defaulted, want %v: %s", tc.expiryDefault, rec.Entry.Entry)
			}
			if !reflect.DeepEqual(e.Flags, tc.flags) || !reflect.DeepEqual(rec.Flags, tc.flags) {
				t.Errorf("entry flags %q, record flags %q, want %q", e.Flags, rec.Flags, tc.flags)
			}
			if tc.flags == nil && strings.Contains(string(rec.Entry.Entry), `"flags"`) {
				t.Errorf("a bound resolution's entry names flags: %s", rec.Entry.Entry)
			}
		})
	}
}
