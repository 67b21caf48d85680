package sig_test

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/acsledger/acsledger/acs/rpcerr"
	"github.com/acsledger/acsledger/acs/sig"
)

// A Guardian signs its response with the session's HMAC-SHA256 key; the
// output is the canonical envelope with result.signature in place.
func ExampleSignEnvelope() {
	key, err := sig.ParseHMACKeyFlag("guardian-1=000102030405060708090a0b0c0d0e0f")
	if err != nil {
		panic(err)
	}
	signer, err := key.Signer("session-1")
	if err != nil {
		panic(err)
	}
	resp := []byte(`{"jsonrpc": "2.0", "id": 1, "result": {"type": "final", "decision": "allow"}}`)
	signed, err := sig.SignEnvelope(resp, sig.Result, signer)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(signed))
	// Output:
	// {"id":1,"jsonrpc":"2.0","result":{"decision":"allow","signature":{"algorithm":"HMAC-SHA256","key_id":"guardian-1","value":"SmL0sN7tBlSRKA2ADKubdT1sC1J7YdIXt7/EqWwz9O0="},"type":"final"}}
}

// A verifier checks a recorded response. Responses do not carry the session
// id, so the caller names it; a change anywhere in the envelope fails with
// a cause that maps to SIGNATURE_INVALID.
func ExampleVerifyEnvelope() {
	key, _ := sig.ParseHMACKeyFlag("guardian-1=000102030405060708090a0b0c0d0e0f")
	keys, _ := sig.NewKeySet(key.Public())
	signed := []byte(`{"id":1,"jsonrpc":"2.0","result":{"decision":"allow","signature":{"algorithm":"HMAC-SHA256","key_id":"guardian-1","value":"SmL0sN7tBlSRKA2ADKubdT1sC1J7YdIXt7/EqWwz9O0="},"type":"final"}}`)

	s, err := sig.VerifyEnvelope(signed, keys, "session-1")
	fmt.Println(s.KeyID, err)

	tampered := bytes.Replace(signed, []byte(`"allow"`), []byte(`"deny"`), 1)
	_, err = sig.VerifyEnvelope(tampered, keys, "session-1")
	fmt.Println(errors.Is(err, sig.ErrBadSignature), rpcerr.CodeOf(err))
	// Output:
	// guardian-1 <nil>
	// true -32004 SIGNATURE_INVALID
}

// The signed input is the canonical envelope without the signature member.
func ExampleSignedInput() {
	req := []byte(`{"params": {"signature": {"algorithm": "HMAC-SHA256", "key_id": "k", "value": "AAAA"}, "payload": {}},
		"method": "steps/userMessage", "id": "a", "jsonrpc": "2.0"}`)
	in, err := sig.SignedInput(req, sig.Params)
	fmt.Println(string(in), err)
	// Output: {"id":"a","jsonrpc":"2.0","method":"steps/userMessage","params":{"payload":{}}} <nil>
}

func ExampleDecodeHybrid() {
	v := sig.EncodeHybrid([]byte("pq"), []byte("c"))
	fmt.Printf("%x\n", v)
	_, _, err := sig.DecodeHybrid(v[:len(v)-1])
	fmt.Println(err)
	// Output:
	// 0000000270710000000163
	// malformed hybrid signature value: classical component claims 1 bytes, 0 remain
}
