//go:build ignore

// gen_heads writes the strict-heads corpus for package verify (heads/):
// the responses of the tamper corpus's valid session signed again with a
// fixed ECDSA-P256 key, mixes of those with the original HMAC-SHA256
// responses, the key's .pub.json, and manifest.json listing what a check
// with and without RequireSignedHeads (acsverify --require-signed-heads)
// must report for them and for bundles of the bundle corpus.
//
// It reads corpus/valid.responses.jsonl, so run gen_corpus.go first. It
// signs with crypto/ecdsa and canonicalizes with gowebpki/jcs directly, not
// with packages acs or acs/sig. ECDSA signatures are RFC 6979
// deterministic (a nil random source), so the output is the same each run.
//
// Run from this directory: go run gen_heads.go gen_util.go
package main

import (
	"bufio"
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"log"
	"os"

	"github.com/gowebpki/jcs"
)

const (
	dir        = "heads"
	session    = "sess-7f3c9a52-1e4b-4d8a-9c61-0b2e5d7a8f14" // gen_corpus.go's
	ecdsaKeyID = "guardian-heads-ecdsa-1"
	// The corpora's HMAC IKMs (gen_corpus.go, gen_bundles.go), as
	// --hmac-ikm values.
	corpusIKM = "guardian-ikm-1=6163736c65646765722074616d70657220636f7270757320494b4d2c20333242"
	bundleIKM = "guardian-hmac-1=6163736c65646765722062756e646c6520636f7270757320484d414320494b4d"
)

// chainCase is a chain of the tamper corpus checked against responses.
type chainCase struct {
	Entries   string `json:"entries"`   // in ../corpus
	Responses string `json:"responses"` // in heads/, or ../corpus/...
	Mutation  string `json:"mutation"`
	// Keys says the ECDSA key of heads/ is given (--keys heads).
	Keys     bool      `json:"keys"`
	HMACIKM  string    `json:"hmac_ikm,omitempty"`
	Strict   bool      `json:"require_signed_heads"`
	Findings []finding `json:"findings"`
	Notices  []finding `json:"notices"`
}

// bundleCase is a bundle of the bundle corpus, checked strictly.
type bundleCase struct {
	File     string    `json:"file"` // in ../bundles
	Mutation string    `json:"mutation"`
	Trust    bool      `json:"trust"` // ../bundles/trust.json
	HMACIKM  string    `json:"hmac_ikm,omitempty"`
	Findings []finding `json:"findings"`
	Notices  []finding `json:"notices"`
}

func main() {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	key := ecdsaKey()
	hmacLines := readLines("corpus/valid.responses.jsonl")
	ecdsaLines := make([][]byte, len(hmacLines))
	for i, l := range hmacLines {
		ecdsaLines[i] = resign(l, key)
	}
	write := func(file string, lines [][]byte) {
		writeFile(dir, file, append(bytes.Join(lines, []byte("\n")), '\n'))
	}
	write("ecdsa.responses.jsonl", ecdsaLines)
	// The Guardian's key before and after a rotation, each way round.
	write("ecdsa_then_hmac.responses.jsonl", append(append([][]byte(nil), ecdsaLines[:7]...), hmacLines[7:]...))
	write("hmac_then_ecdsa.responses.jsonl", append(append([][]byte(nil), hmacLines[:5]...), ecdsaLines[5:]...))
	write("ecdsa_last_missing.responses.jsonl", ecdsaLines[:len(ecdsaLines)-1])
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		log.Fatal(err)
	}
	writeJSON(dir, ecdsaKeyID+".pub.json", map[string]string{"key_id": ecdsaKeyID, "algorithm": "ECDSA-P256", "public": base64.StdEncoding.EncodeToString(der)}, " ")

	n := len(hmacLines)
	allHMAC := make([]finding, n)
	for i := range allHMAC {
		allHMAC[i] = finding{"unverifiable_hmac", -1}
	}
	var badSigs []finding
	for i := range n {
		badSigs = append(badSigs, finding{"response_signature_invalid", i})
	}
	hu := func(i int) finding { return finding{"head_unauthenticated", i} }
	chains := []chainCase{
		{"valid.jsonl", "ecdsa.responses.jsonl", "none: ECDSA-P256 heads, key given", true, "", true, nil, nil},
		{"valid.jsonl", "ecdsa.responses.jsonl", "ECDSA-P256 heads, key not given: no head binds anything", false, "", true, append(badSigs, hu(0)), nil},
		{"valid.jsonl", "../corpus/valid.responses.jsonl", "HMAC-SHA256 heads, IKM given: a key-holder could have signed them", false, corpusIKM, true, []finding{hu(0)}, nil},
		{"valid.jsonl", "../corpus/valid.responses.jsonl", "HMAC-SHA256 heads, IKM not given", false, "", true, []finding{hu(0)}, allHMAC},
		{"valid.jsonl", "../corpus/valid.responses.jsonl", "HMAC-SHA256 heads, IKM not given, not strict: the default is unchanged", false, "", false, nil, allHMAC},
		{"valid.jsonl", "ecdsa_then_hmac.responses.jsonl", "ECDSA-P256 heads for entries 0-6, HMAC-SHA256 after: entries 7-9 unbound", true, corpusIKM, true, []finding{hu(7)}, nil},
		{"valid.jsonl", "hmac_then_ecdsa.responses.jsonl", "HMAC-SHA256 heads for entries 0-4, ECDSA-P256 after: the later heads bind the earlier entries", true, corpusIKM, true, nil, nil},
		{"valid.jsonl", "ecdsa_last_missing.responses.jsonl", "ECDSA-P256 heads, the last response left out: the last entry is unbound", true, "", true, []finding{{"entry_without_response", 9}, hu(9)}, nil},
		{"rewritten.jsonl", "ecdsa.responses.jsonl", "rewritten from entry 6 on: the signed heads expose it, and they are authenticated", true, "", true, []finding{{"chain_mismatch", 6}}, nil},
	}
	for i := range chains {
		chains[i].Findings, chains[i].Notices = orNone(chains[i].Findings), orNone(chains[i].Notices)
	}

	hmacNotices := make([]finding, 9) // the bundle corpus's session has 9 entries
	for i := range hmacNotices {
		hmacNotices[i] = finding{"unverifiable_hmac", -1}
	}
	fromBundle := []finding{{"keys_from_bundle", -1}, {"keys_from_bundle", -1}, {"keys_from_bundle", -1}}
	bundles := []bundleCase{
		{"valid.json", "none: ECDSA-P256 heads, trusted", true, "", nil, nil},
		{"valid_mldsa65.json", "none: ML-DSA-65 heads, trusted", true, "", nil, nil},
		{"valid_hybrid.json", "none: ML-DSA-65+ECDSA-P256 heads, trusted", true, "", nil, nil},
		{"valid_steps.json", "none: steps layout, ECDSA-P256 heads, trusted", true, "", nil, nil},
		{"valid_hmac.json", "HMAC-SHA256 heads, IKM given", true, bundleIKM, []finding{hu(0)}, nil},
		{"valid_hmac.json", "HMAC-SHA256 heads, IKM not given", true, "", []finding{hu(0)}, hmacNotices},
		{"valid.json", "ECDSA-P256 heads checked with the key the bundle carries", false, "", []finding{hu(0)}, fromBundle},
		{"no_responses.json", "no responses at all", true, "", []finding{hu(0)}, []finding{{"heads_not_checked", -1}}},
		{"entry_without_response.json", "entry 3 without a response: a later signed head binds it", true, "", []finding{{"entry_without_response", 3}}, nil},
		{"chain_mismatch.json", "rewritten from entry 5 on: authenticated heads expose it", true, "", []finding{{"chain_mismatch", 5}}, nil},
	}
	for i := range bundles {
		bundles[i].Findings, bundles[i].Notices = orNone(bundles[i].Findings), orNone(bundles[i].Notices)
	}
	writeJSON(dir, "manifest.json", map[string]any{
		"comment": "Written by gen_heads.go. Each chain case checks ../corpus/ENTRIES against RESPONSES (in heads/, session " + session +
			") with the key of heads/*.pub.json when keys is true and the HMAC IKM when given; each bundle case checks ../bundles/FILE with ../bundles/trust.json when trust is true. require_signed_heads says the check requires heads signed by a trusted asymmetric key (bundle cases always do). Findings and notices are listed in order (code, 0-based entry_index, -1 for none), and nothing else may be reported.",
		"session": session,
		"chains":  chains,
		"bundles": bundles,
	}, "  ")
}

// ecdsaKey is the fixed key the heads are signed with.
func ecdsaKey() *ecdsa.PrivateKey {
	seed := sha256.Sum256([]byte("acsledger strict heads corpus ECDSA-P256 key"))
	k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), seed[:])
	if err != nil {
		log.Fatal(err)
	}
	return k
}

// resign replaces the signature of one response (a JCS line signed in
// result) by an ECDSA-P256 signature over its signed input: the JCS form of
// the envelope without result.signature (ACS §10), as ASN.1 DER over
// SHA-256.
func resign(line []byte, key *ecdsa.PrivateKey) []byte {
	var env map[string]any
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	if err := d.Decode(&env); err != nil {
		log.Fatal(err)
	}
	result := env["result"].(map[string]any)
	delete(result, "signature")
	digest := sha256.Sum256(canon(env))
	value, err := key.Sign(nil, digest[:], crypto.SHA256) // nil: RFC 6979
	if err != nil {
		log.Fatal(err)
	}
	result["signature"] = map[string]string{"algorithm": "ECDSA-P256", "key_id": ecdsaKeyID, "value": base64.StdEncoding.EncodeToString(value)}
	return canon(env)
}

// canon is the RFC 8785 form of v.
func canon(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		log.Fatal(err)
	}
	out, err := jcs.Transform(b)
	if err != nil {
		log.Fatal(err)
	}
	return out
}

func readLines(path string) [][]byte {
	f, err := os.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	var lines [][]byte
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, bytes.Clone(sc.Bytes()))
	}
	if err := sc.Err(); err != nil {
		log.Fatal(err)
	}
	return lines
}
