package guardian

import (
	"bytes"
	"encoding/json"
)

// MaxBatch caps the elements of one JSON-RPC batch (ACS §3). Every element
// is answered with its own signed response, so a batch's length is the
// work one body can cause: with MaxBodyBytes it bounds a request to
// MaxBatch policy evaluations, ledger appends and signatures, and the
// answer to about MaxBatch times one response. A longer batch is refused
// whole with -32600 before any element is read, let alone signed.
const MaxBatch = 64

// batchLen counts the elements of the JSON array body, stopping at limit+1:
// a body of half a million elements costs no more to refuse than one of
// limit+1. ok is false when body is not an array whose first limit+1
// elements (or all of them, if fewer) are well-formed JSON values; the
// canonicalizer then names what is wrong with it.
func batchLen(body []byte, limit int) (n int, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return 0, false
	}
	for dec.More() {
		if n > limit {
			return n, true
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return n, false
		}
		n++
	}
	return n, true
}
