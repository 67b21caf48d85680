package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
)

// TestBundleReadInPieces: a bundle read one byte at a time, or with the
// end of input reported with the last bytes, gives the report it gives
// when read whole, for every bundle of the corpus. The reader's buffer
// moves and grows under every value.
func TestBundleReadInPieces(t *testing.T) {
	t.Parallel()
	files := globTestFiles(t, "testdata", "bundles", "*.json")
	n := 0
	for _, name := range files {
		base := filepath.Base(name)
		if base == "manifest.json" || base == "trust.json" {
			continue
		}
		n++
		b := readTestFile(t, name)
		trust := readTrust(t, "")
		want, err := VerifyBundle(bytes.NewReader(b), trust)
		if err != nil {
			t.Fatalf("%s: %v", base, err)
		}
		for how, r := range map[string]func() *Report{
			"one byte at a time": func() *Report { r, _ := VerifyBundle(iotest.OneByteReader(bytes.NewReader(b)), trust); return r },
			"EOF with data":      func() *Report { r, _ := VerifyBundle(iotest.DataErrReader(bytes.NewReader(b)), trust); return r },
			"half at a time":     func() *Report { r, _ := VerifyBundle(iotest.HalfReader(bytes.NewReader(b)), trust); return r },
		} {
			if got := r(); !reflect.DeepEqual(got, want) {
				t.Errorf("%s read %s: %+v, want %+v", base, how, got, want)
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d bundles", n)
	}
}

// TestBundleStrictSteps: a step object is read as strictly as an entry:
// a member given twice, an unknown member, a name that is not valid UTF-8,
// or a step that is not an object is an input error naming "steps" and
// the step; a name written with escapes is the name it spells.
func TestBundleStrictSteps(t *testing.T) {
	t.Parallel()
	head := `{"format":"acsledger-evidence-bundle","version":1,"session_id":"s",`
	entry := `{"entry_id":"a","step_id":"b","step_type":"intent_extension","previous_hash":null}`
	for _, c := range []struct{ in, want string }{
		{head + `"steps":[{"entry":` + entry + `,"entry":` + entry + `}]}`, `[0]: duplicate member "entry"`},
		{head + `"steps":[{"entry":` + entry + `,"response":null,"response":null}]}`, `[0]: duplicate member "response"`},
		{head + `"steps":[{"entry":` + entry + `},{"entry":` + entry + `,"Entry":1}]}`, `[1]: unknown field "Entry"`},
		{head + `"steps":[{"entry":` + entry + ",\"r\xffsponse\":null}]}", "[0]: member name: invalid UTF-8"},
		{head + `"steps":[[` + entry + `]]}`, "[0]: want an object, not an array"},
		{head + `"steps":[{"response":null}]}`, `[0]: step has no "entry"`},
		{head + `"steps":[{"entry":` + entry + `}}]}`, "invalid character '}' after array element"},
		{head + `"steps":[{"entry":` + entry + `]}`, "[0]: invalid character ']' after object member"},
		{head + `"steps":[{"entry":` + entry + `,"response":{"jsonrpc":"2.0","id":1,"result":{"request_id":7}}}]}`, "[0]: response: response 0: result.request_id is a number, want a string"},
		{head + `"steps":[{"entry":` + entry[:40], "[0]: unexpected EOF"},
	} {
		_, err := VerifyBundle(strings.NewReader(c.in), nil)
		var ie *InputError
		if !errors.As(err, &ie) {
			t.Errorf("%q: error %v, want an *InputError", c.in, err)
			continue
		}
		if ie.Member != "steps" || !strings.Contains(err.Error(), c.want) || ie.Offset <= 0 || ie.Offset > int64(len(c.in)) {
			t.Errorf("%q: error %q (member %q, offset %d), want member \"steps\" and %q", c.in, err, ie.Member, ie.Offset, c.want)
		}
	}

	escaped := head + `"st\u0065ps":[{"\u0065ntry":` + entry + `,"response":null}]}`
	r, err := VerifyBundle(strings.NewReader(escaped), nil)
	if err != nil || r.Entries != 1 {
		t.Fatalf("names written with escapes: %v, %+v", err, r)
	}
}

// TestAddResponseRefuses: a response that is not JSON the canonicalizer
// accepts is a malformed envelope, and one whose result, request_id or
// chain_hash has the wrong type is refused, each with an error naming
// the response and the problem; none is a finding.
func TestAddResponseRefuses(t *testing.T) {
	t.Parallel()
	hash := strings.Repeat("ab", 32)
	for _, c := range []struct {
		in, want  string
		malformed bool
	}{
		{`{"jsonrpc":"2.0","id":1,"result":{"request_id":"r1","chain_hash":"` + hash + `"}`, "response 0: malformed envelope", true},
		{`{"jsonrpc":"2.0","id":1,"id":2,"result":{"request_id":"r1","chain_hash":"` + hash + `"}}`, "duplicate", true},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"request_id\":\"r\xff\",\"chain_hash\":\"" + hash + "\"}}", "UTF-8", true},
		{`{"jsonrpc":"2.0","id":1,"result":{"request_id":"r1","chain_hash":"` + hash + `"}} x`, "after the JSON value", true},
		{`{"jsonrpc":"2.0","id":1,"result":"done"}`, "response 0: result is a string, want an object", false},
		{`{"jsonrpc":"2.0","id":1,"result":{"request_id":["r1"],"chain_hash":"` + hash + `"}}`, "result.request_id is an array, want a string", false},
		{`{"jsonrpc":"2.0","id":1,"result":{"request_id":"r1","chain_hash":7}}`, "result.chain_hash is a number, want a string", false},
		{`[{"jsonrpc":"2.0","id":1,"result":{}}]`, "a response is a JSON object, not an array", false},
	} {
		hc := NewHeadChecker(nil, "s")
		fs, ns, err := hc.AddResponse([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) || errors.Is(err, sig.ErrMalformedEnvelope) != c.malformed || fs != nil || ns != nil {
			t.Errorf("%q: findings %v, notices %v, error %v; want an error containing %q (malformed envelope: %v)", c.in, fs, ns, err, c.want, c.malformed)
		}
	}
}

// TestResponseFieldsAgree: on every response of the corpus, the one-pass
// reading of request_id and chain_hash agrees with encoding/json's.
func TestResponseFieldsAgree(t *testing.T) {
	t.Parallel()
	n := 0
	for _, name := range []string{"valid.responses.jsonl", "forged.responses.jsonl", "missing.responses.jsonl"} {
		b := readTestFile(t, "testdata", "corpus", name)
		for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			var want struct {
				Result *struct {
					RequestID *string `json:"request_id"`
					ChainHash *string `json:"chain_hash"`
				} `json:"result"`
			}
			if err := json.Unmarshal(line, &want); err != nil {
				t.Fatal(err)
			}
			canon, err := acs.Canonicalize(line)
			if err != nil {
				t.Fatal(err)
			}
			got, err := readResponseFields(canon)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			if got.result != (want.Result != nil) {
				t.Fatalf("%s: result %v", line, got.result)
			}
			if want.Result == nil {
				continue
			}
			n++
			if w := want.Result.RequestID; w != nil && *w != got.requestID || w == nil && got.requestID != "" {
				t.Errorf("%s: request_id %q", line, got.requestID)
			}
			if w := want.Result.ChainHash; (w == nil) != (got.chainHash == nil) || w != nil && *w != *got.chainHash {
				t.Errorf("%s: chain_hash %v", line, got.chainHash)
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d responses with a result", n)
	}
}
