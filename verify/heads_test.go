package verify

import (
	"os"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
)

const corpusSession = "sess-7f3c9a52-1e4b-4d8a-9c61-0b2e5d7a8f14"

func openCorpus(t *testing.T, name string) *os.File {
	t.Helper()
	return openTestFile(t, "testdata", "corpus", name)
}

// TestHeadsOtherIKM: once an auditor gives an HMAC secret, a response
// signed under another HMAC key_id fails instead of being a notice.
func TestHeadsOtherIKM(t *testing.T) {
	t.Parallel()
	k, err := sig.NewHMACKey("another-ikm", []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := sig.NewKeySet(k.Public())
	r, err := VerifyChainHeads(openCorpus(t, "valid.jsonl"), openCorpus(t, "valid.responses.jsonl"), keys, corpusSession)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Notices) != 0 || len(r.Findings) != 10 {
		t.Fatalf("findings %v, notices %v; want 10 response_signature_invalid", codes(r.Findings), codes(r.Notices))
	}
	for _, f := range r.Findings {
		if f.Code != CodeResponseSignatureInvalid || f.Actual != "HMAC-SHA256/guardian-ikm-1" || !strings.Contains(f.Message, "unknown key_id") {
			t.Errorf("finding %+v", f)
		}
	}
}

// TestHeadsNoSession: HMAC responses without a session id to derive the
// key from cannot be checked: notices, and the heads still compared.
func TestHeadsNoSession(t *testing.T) {
	t.Parallel()
	k, _ := sig.ParseHMACKeyFlag("guardian-ikm-1=6163736c65646765722074616d70657220636f7270757320494b4d2c20333242")
	keys, _ := sig.NewKeySet(k.Public())
	r, err := VerifyChainHeads(openCorpus(t, "rewritten.jsonl"), openCorpus(t, "valid.responses.jsonl"), keys, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(codes(r.Findings), " "); got != "chain_mismatch@6" {
		t.Errorf("findings %s, want chain_mismatch@6", got)
	}
	if len(r.Notices) != 10 || r.Notices[0].Code != CodeUnverifiableHMAC || !strings.Contains(r.Notices[0].Message, "no session id") {
		t.Errorf("notices %v", r.Notices)
	}
}

// guardianKey makes a Guardian's ECDSA-P256 response key, "g1": the key
// set that trusts it, and a sign that signs an envelope with it in the
// member MemberOf names.
func guardianKey(t *testing.T) (*sig.KeySet, func(env string) []byte) {
	t.Helper()
	k, err := sig.GenerateKey(sig.ECDSAP256, "g1")
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := sig.NewKeySet(k.Public())
	signer, _ := k.Signer("s")
	return keys, func(env string) []byte {
		t.Helper()
		m, err := sig.MemberOf([]byte(env))
		if err != nil {
			t.Fatal(err)
		}
		out, err := sig.SignEnvelope([]byte(env), m, signer)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
}

// TestHeadChecker drives a HeadChecker by hand, each response just before
// its entry: an error response and a response without chain_hash publish
// nothing, two responses for one step are both compared, and a matched
// response is forgotten.
func TestHeadChecker(t *testing.T) {
	t.Parallel()
	keys, sign := guardianKey(t)
	hc := NewHeadChecker(keys, "s")
	var v ChainVerifier
	add := func(env []byte) {
		t.Helper()
		fs, ns, err := hc.AddResponse(env)
		if err != nil || len(fs) != 0 || len(ns) != 0 {
			t.Fatalf("AddResponse: %v %v %v", fs, ns, err)
		}
	}
	entry := func(i int) *acs.Entry {
		var prev *acs.Hash
		if v.Entries() > 0 {
			h := v.Head()
			prev = &h
		}
		e, err := acs.ParseEntry([]byte(`{"entry_id":"e` + string(rune('0'+i)) + `","step_id":"r` + string(rune('0'+i)) + `","step_type":"steps/toolCallRequest"}`))
		if err != nil {
			t.Fatal(err)
		}
		h := acs.EntryHash(e.Content, prev)
		e.PreviousHash, e.EntryHash = prev, &h
		return e
	}

	e0 := entry(0)
	add(sign(`{"jsonrpc":"2.0","id":1,"result":{"type":"final","acs_version":"0.1.0","request_id":"r0","decision":"allow","chain_hash":"` + e0.EntryHash.String() + `"}}`))
	add(sign(`{"jsonrpc":"2.0","id":1,"error":{"code":-32004,"message":"signature invalid"}}`))
	add(sign(`{"jsonrpc":"2.0","id":2,"result":{"type":"final","acs_version":"0.1.0","request_id":"ping","decision":"allow"}}`))
	if fs := append(v.Add(e0), hc.CheckEntry(0, e0, v.Head(), false)...); len(fs) != 0 {
		t.Fatalf("entry 0: %v", fs)
	}
	if len(hc.published) != 0 {
		t.Errorf("%d responses still held after their entries were checked", len(hc.published))
	}

	e1 := entry(1)
	add(sign(`{"jsonrpc":"2.0","id":3,"result":{"type":"final","acs_version":"0.1.0","request_id":"r1","decision":"allow","chain_hash":"` + e1.EntryHash.String() + `"}}`))
	add(sign(`{"jsonrpc":"2.0","id":3,"result":{"type":"final","acs_version":"0.1.0","request_id":"r1","decision":"deny","reasoning":"x","chain_hash":"` + strings.Repeat("ab", 32) + `"}}`))
	fs := append(v.Add(e1), hc.CheckEntry(1, e1, v.Head(), false)...)
	if len(fs) != 1 || fs[0].Code != CodeChainMismatch || fs[0].Expected != strings.Repeat("ab", 32) || fs[0].Actual != e1.EntryHash.String() {
		t.Fatalf("two heads for one step: %v", fs)
	}
	// A second entry with the same step_id has no response left.
	if fs := hc.CheckEntry(2, e1, v.Head(), false); len(fs) != 1 || fs[0].Code != CodeEntryWithoutResponse {
		t.Errorf("repeated step: %v", fs)
	}
	if fs := hc.Finish(); len(fs) != 0 {
		t.Errorf("Finish: %v", fs)
	}
	// Not JSON-RPC at all: an error, not a finding.
	if _, _, err := hc.AddResponse([]byte(`{"jsonrpc":"2.0","id":1}`)); err == nil {
		t.Error("an envelope with neither result nor error was accepted")
	}
}

// TestHeadCheckerPreviousChainHash: a response may publish, beside its
// chain_hash, the previous_chain_hash its step's entry was chained onto
// (the Guardian does after approver resolutions it wrote on its own);
// the check holds it to the entry's previous_hash, and reports a signed
// one that differs as chain_mismatch.
func TestHeadCheckerPreviousChainHash(t *testing.T) {
	t.Parallel()
	keys, sign := guardianKey(t)
	// entry 0: an ASK step; entry 1: the approver's grant (no response);
	// entry 2: the next step.
	var entries []*acs.Entry
	var prev *acs.Hash
	for i, typ := range []string{"steps/toolCallRequest", "intent_extension", "steps/toolCallRequest"} {
		e, err := acs.ParseEntry([]byte(`{"entry_id":"e` + string(rune('0'+i)) + `","step_id":"r` + string(rune('0'+i)) + `","step_type":"` + typ + `"}`))
		if err != nil {
			t.Fatal(err)
		}
		h := acs.EntryHash(e.Content, prev)
		e.PreviousHash, e.EntryHash = prev, &h
		entries = append(entries, e)
		prev = &h
	}
	response := func(i int, previous string) []byte {
		return sign(`{"jsonrpc":"2.0","id":1,"result":{"type":"final","acs_version":"0.1.0","request_id":"r` + string(rune('0'+i)) + `","decision":"allow","chain_hash":"` + entries[i].EntryHash.String() + `"` + previous + `}}`)
	}
	for _, c := range []struct {
		name     string
		previous string
		want     string
	}{
		{"the head after the grant", `,"previous_chain_hash":"` + entries[1].EntryHash.String() + `"`, ""},
		{"the head before the grant", `,"previous_chain_hash":"` + entries[0].EntryHash.String() + `"`, CodeChainMismatch},
	} {
		t.Run(c.name, func(t *testing.T) {
			hc := NewHeadChecker(keys, "s")
			var v ChainVerifier
			for _, env := range [][]byte{response(0, ""), response(2, c.previous)} {
				if fs, ns, err := hc.AddResponse(env); err != nil || len(fs)+len(ns) != 0 {
					t.Fatalf("AddResponse: %v %v %v", fs, ns, err)
				}
			}
			var fs []Finding
			for i, e := range entries {
				fs = append(fs, v.Add(e)...)
				fs = append(fs, hc.CheckEntry(i, e, v.Head(), false)...)
			}
			fs = append(fs, hc.Finish()...)
			switch {
			case c.want == "" && len(fs) != 0:
				t.Fatalf("findings %v, want none", fs)
			case c.want != "" && (len(fs) != 1 || fs[0].Code != c.want || fs[0].EntryIndex != 2 || fs[0].Expected != entries[0].EntryHash.String() || fs[0].Actual != entries[1].EntryHash.String()):
				t.Fatalf("findings %v, want one %s at entry 2", fs, c.want)
			}
		})
	}
}

// TestEntryWithoutResponseStepTypes: every step type the Guardian chains
// for a request, the version-pinned wrapped:mcp-<version>/... form
// included, needs a response publishing its head; an entry of one without
// a response is entry_without_response. Entries the Guardian writes for an
// approver's resolution answer no request.
func TestEntryWithoutResponseStepTypes(t *testing.T) {
	t.Parallel()
	keys, _ := sig.NewKeySet()
	for stepType, want := range map[string]bool{
		"steps/toolCallRequest":             true,
		"protocols/MCP/tools/call":          true,
		"wrapped:mcp-2025-06-18/tools/call": true,
		"agbom/snapshot":                    true,
		"intent_extension":                  false,
		"ask_resolution":                    false,
	} {
		e, err := acs.ParseEntry([]byte(`{"entry_id":"e0","step_id":"r0","step_type":"` + stepType + `"}`))
		if err != nil {
			t.Fatal(err)
		}
		h := acs.EntryHash(e.Content, nil)
		e.EntryHash = &h
		fs := NewHeadChecker(keys, "s").CheckEntry(0, e, h, false)
		if got := len(fs) == 1 && fs[0].Code == CodeEntryWithoutResponse; got != want || (!want && len(fs) != 0) {
			t.Errorf("%s without a response: findings %v, want entry_without_response %v", stepType, fs, want)
		}
	}
}
