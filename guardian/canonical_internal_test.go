package guardian

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"testing"

	"github.com/acsledger/acsledger/acs"
)

// canonicalParamsBodies are request bodies whose params the canonical cut
// must hash exactly as acs.RequestHash hashes the params as received.
var canonicalParamsBodies = []string{
	`{"jsonrpc":"2.0","id":1,"method":"steps/toolCallRequest","params":{"b":1,"a":2}}`,
	` { "params" : { "z" : [ 1.0 , 2e3 , -0 , 1E-7 ] , "a" : "\u00e9\ud83d\ude00" } , "id" : "x" , "method":"m", "jsonrpc":"2.0" } `,
	`{"id":"a\"params\":{}","method":"p,\"params\"","jsonrpc":"2.0","params":{"signature":{"value":"AAAA","key_id":"k","algorithm":"HMAC-SHA256"},"payload":{"s":"\\\"}]\u0000"}}}`,
	`{"params":{"n":9007199254740993,"big":123456789012345678901234567890,"t":true,"f":false,"z":null,"e":{},"l":[]},"zz":[{"params":1}]}`,
	`{"a":[[[]]],"params":{"\u0070":"key spelled with an escape"},"b":{"params":{"inner":1}}}`,
}

func TestCanonicalParamsHash(t *testing.T) {
	for _, body := range canonicalParamsBodies {
		checkCanonicalParams(t, []byte(body))
	}
}

// FuzzCanonicalParams holds the cut to acs.RequestHash on any object with
// an object-valued params member.
//
//	go test ./guardian -run XXX -fuzz FuzzCanonicalParams -fuzztime 30s
func FuzzCanonicalParams(f *testing.F) {
	for _, b := range canonicalParamsBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		canon, err := acs.Canonicalize(body)
		if err != nil {
			return
		}
		var top map[string]json.RawMessage
		if json.Unmarshal(body, &top) != nil || kindOf(top["params"]) != "object" {
			if cut := acs.CanonicalMember(canon, "params"); cut != nil && kindOf(cut) == "object" {
				t.Fatalf("canonicalMember found params object %s in %s, which has none", cut, body)
			}
			return
		}
		checkCanonicalParams(t, body)
	})
}

func checkCanonicalParams(t *testing.T, body []byte) {
	t.Helper()
	canon, err := acs.Canonicalize(body)
	if err != nil {
		t.Fatalf("Canonicalize(%s): %v", body, err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatal(err)
	}
	cut := acs.CanonicalMember(canon, "params")
	if cut == nil {
		t.Fatalf("canonicalMember found no params in %s", canon)
	}
	want, err := acs.RequestHash(top["params"])
	if err != nil {
		t.Fatalf("RequestHash(%s): %v", top["params"], err)
	}
	got, err := requestHash(&request{params: top["params"], canonParams: cut})
	if err != nil || got != want {
		t.Errorf("body %s: hash of the canonical cut %s = %s, %v; RequestHash of params = %s", body, cut, got, err, want)
	}
	wantCanon, _ := acs.Canonicalize(top["params"])
	if !bytes.Equal(cut, wantCanon) {
		t.Errorf("body %s: cut %s, want %s", body, cut, wantCanon)
	}
	if got := sha256.Sum256(wantCanon); acs.Hash(got) != want {
		t.Errorf("RequestHash is not the SHA-256 of the canonical params")
	}
}

// TestRequestKeyFromCanonicalParams: the key of a this_request grant is the
// same whether it is cut from the canonical params serve made or computed
// from the payload as received (batch elements, and resume from the stored
// params), whatever the member order, spacing and escapes.
func TestRequestKeyFromCanonicalParams(t *testing.T) {
	for _, params := range []string{
		`{"payload":{"tool":{"name":"pay"},"arguments":{"amount":{"value":1.0}}}}`,
		` { "payload" : { "arguments" : { "amount" : { "value" : 1E0 } } , "tool" : { "name" : "p\u0061y" } } , "a" : 1 } `,
	} {
		canon, err := acs.Canonicalize([]byte(params))
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Payload json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal([]byte(params), &p); err != nil {
			t.Fatal(err)
		}
		cut := (&request{method: "steps/toolCallRequest", canonParams: canon, payload: p.Payload}).key()
		whole := (&request{method: "steps/toolCallRequest", payload: p.Payload}).key()
		if cut != whole || cut != requestKey("steps/toolCallRequest", json.RawMessage(`{"arguments":{"amount":{"value":1}},"tool":{"name":"pay"}}`)) {
			t.Errorf("%s: key %q from the canonical params, %q from the payload", params, cut, whole)
		}
	}
}
