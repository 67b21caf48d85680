//go:build ignore

// gen_hmac_vectors writes hmac_vectors.json: HMAC-SHA256 signatures over ACS
// envelopes, computed along a path independent of package sig. The
// envelopes are written out by hand in RFC 8785 form (no canonicalizer is
// run), HKDF is written out here from RFC 5869 §2.2-2.3 on top of
// crypto/hmac (package sig uses crypto/hkdf), and the signature member is
// spliced in by string templates.
//
// Run from this directory: go run gen_hmac_vectors.go
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// hkdfSHA256 is RFC 5869 HKDF with SHA-256: Extract (§2.2), with an empty
// salt standing for HashLen zero bytes, then Expand (§2.3).
func hkdfSHA256(ikm, salt, info []byte, l int) []byte {
	if len(salt) == 0 {
		salt = make([]byte, sha256.Size)
	}
	ext := hmac.New(sha256.New, salt)
	ext.Write(ikm)
	prk := ext.Sum(nil)

	var okm, t []byte
	for i := byte(1); len(okm) < l; i++ {
		exp := hmac.New(sha256.New, prk)
		exp.Write(t)
		exp.Write(info)
		exp.Write([]byte{i})
		t = exp.Sum(nil)
		okm = append(okm, t...)
	}
	return okm[:l]
}

type vector struct {
	Name           string `json:"name"`
	KeyID          string `json:"key_id"`
	IKMHex         string `json:"ikm_hex"`
	SessionID      string `json:"session_id"`
	SessionKeyHex  string `json:"session_key_hex"`
	Member         string `json:"member"`
	Envelope       string `json:"envelope"`
	SignedInput    string `json:"signed_input"`
	SignatureValue string `json:"signature_value"`
	SignedEnvelope string `json:"signed_envelope"`
}

// Each template is an envelope in RFC 8785 form with @@ where the signature
// member goes; sigFmt places it with its comma.
var templates = []struct {
	name, member, session, template, sigFmt string
	// loose, if set, is a non-canonical spelling of the unsigned envelope
	// (whitespace, member order, escapes) that must give the same input.
	loose string
}{
	{
		name:    "request-tool-call",
		member:  "params",
		session: "3f1e2d4c-5b6a-4789-8abc-def012345678",
		template: `{"id":7,"jsonrpc":"2.0","method":"steps/toolCallRequest","params":{"acs_version":"0.1.0",` +
			`"metadata":{"agent_id":"agent-1","session_id":"3f1e2d4c-5b6a-4789-8abc-def012345678"},` +
			`"payload":{"arguments":{"command":"rm -rf /tmp/x","note":"naïve café ☕"},"tool_name":"shell.exec"},` +
			`"request_id":"0b7e6f2a-1c3d-4e5f-8a9b-0c1d2e3f4a5b",@@"timestamp":"2026-06-01T12:00:00Z"}}`,
		sigFmt: `"signature":%s,`,
		loose: `{ "jsonrpc": "2.0", "method": "steps/toolCallRequest", "id": 7,
  "params": { "timestamp": "2026-06-01T12:00:00Z", "request_id": "0b7e6f2a-1c3d-4e5f-8a9b-0c1d2e3f4a5b",
    "payload": { "tool_name": "shell.exec", "arguments": { "note": "na\u00efve caf\u00e9 \u2615", "command": "rm -rf \/tmp\/x" } },
    "metadata": { "session_id": "3f1e2d4c-5b6a-4789-8abc-def012345678", "agent_id": "agent-1" },
    "acs_version": "0.1.0" } }`,
	},
	{
		name:    "result-deny-with-chain-hash",
		member:  "result",
		session: "3f1e2d4c-5b6a-4789-8abc-def012345678",
		template: `{"id":7,"jsonrpc":"2.0","result":{"acs_version":"0.1.0",` +
			`"chain_hash":"5d41402abc4b2a76b9719d911017c592aaf4c8e5e1b1b3c0f2a4c6e8d0b2f4a6","decision":"deny",` +
			`"policy_references":[{"policy_id":"shell","policy_version":"v3","rule_id":"no-rm"}],` +
			`"reason_codes":["destructive_command"],"reasoning":"rm -rf is not allowed",` +
			`"request_id":"0b7e6f2a-1c3d-4e5f-8a9b-0c1d2e3f4a5b",@@"type":"final"}}`,
		sigFmt: `"signature":%s,`,
	},
	{
		name:    "error-replay",
		member:  "error",
		session: "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d",
		template: `{"error":{"code":-32005,"data":{"message":"request_id seen before","reason":"replay_detected"},` +
			`"message":"REPLAY_DETECTED"@@},"id":"req-42","jsonrpc":"2.0"}`,
		sigFmt: `,"signature":%s`,
	},
	{
		name:    "result-first-member",
		member:  "result",
		session: "s",
		// signature sorts first among {"signature", "type"}.
		template: `{"id":null,"jsonrpc":"2.0","result":{@@"type":"final"}}`,
		sigFmt:   `"signature":%s,`,
	},
}

func main() {
	var out []vector
	for _, t := range templates {
		ikmSum := sha256.Sum256([]byte("acsledger test IKM for " + t.name))
		ikm := ikmSum[:]
		key := hkdfSHA256(ikm, nil, []byte(t.session), 32)
		unsigned := strings.Replace(t.template, "@@", "", 1)
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(unsigned))
		value := base64.StdEncoding.EncodeToString(mac.Sum(nil))
		keyID := "hmac-" + t.name
		sigObj := fmt.Sprintf(`{"algorithm":"HMAC-SHA256","key_id":%q,"value":%q}`, keyID, value)
		signed := strings.Replace(t.template, "@@", fmt.Sprintf(t.sigFmt, sigObj), 1)
		env := unsigned
		if t.loose != "" {
			env = t.loose
		}
		out = append(out, vector{
			Name: t.name, KeyID: keyID, IKMHex: hex.EncodeToString(ikm), SessionID: t.session,
			SessionKeyHex: hex.EncodeToString(key), Member: t.member,
			Envelope: env, SignedInput: unsigned, SignatureValue: value, SignedEnvelope: signed,
		})
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		panic(err)
	}
	if err := os.WriteFile("hmac_vectors.json", append(b, '\n'), 0o644); err != nil {
		panic(err)
	}
}
