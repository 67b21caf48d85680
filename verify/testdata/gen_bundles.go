//go:build ignore

// gen_bundles writes the evidence-bundle tamper corpus for package verify:
// valid bundles of one agent session (docs/evidence-bundle.md) and, for each
// bundle-level finding code, a bundle made from a valid one by one specific
// tampering, plus manifest.json listing the findings and notices each must
// give, and trust.json, the keys an auditor trusts.
//
// Keys are fixed (derived from seeds). ECDSA, ML-DSA and the ML-DSA-44
// cosignatures sign with fresh randomness, so running this again gives
// different signature bytes and the same verdicts: the files are generated
// once and committed; tests verify signatures, never compare them.
//
// The Merkle log is built with golang.org/x/mod/sumdb/tlog and the leaves
// encoded by ledger/tlog, so the corpus checks verify's own leaf encoding
// and proof checks rather than agreeing with them by construction.
//
// Run from this directory: go run gen_bundles.go gen_util.go
package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
	ltlog "github.com/acsledger/acsledger/ledger/tlog"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const (
	sessionID = "sess-2b8e41d0-93c7-4f1a-b5e2-7d6c0a9f3e18"
	origin    = "log.acsledger.example/audit"
	hmacKeyID = "guardian-hmac-1"
)

var hmacIKM = []byte("acsledger bundle corpus HMAC IKM")

// seed derives a fixed 32-byte seed from a label.
func seed(label string) [32]byte {
	return sha256.Sum256([]byte("acsledger verify corpus seed: " + label))
}

type decision struct {
	Disposition      string      `json:"disposition"`
	Reasoning        string      `json:"reasoning,omitempty"`
	ReasonCodes      []string    `json:"reason_codes"`
	PolicyReferences []policyRef `json:"policy_references"`
}

// entry is the ContextEntry the Guardian writes (guardian/step.go).
type entry struct {
	entryHead
	AgentID      string   `json:"agent_id"`
	Decision     decision `json:"decision"`
	PreviousHash *string  `json:"previous_hash"`
	EntryHash    string   `json:"entry_hash,omitempty"`
}

type step struct {
	method, disposition, reasoning, rule string
	egress                               bool // also cites the egress policy
}

var steps = []step{
	{"steps/sessionStart", "allow", "", "default_allow", false},
	{"steps/userMessage", "allow", "", "default_allow", false},
	{"steps/toolCallRequest", "allow", "Listing a report directory is within the session's intent.", "read_only_fs", false},
	{"steps/toolCallResult", "allow", "", "default_allow", false},
	{"steps/memoryStore", "allow", "", "memory_lineage", false},
	{"steps/toolCallRequest", "deny", "Piping a downloaded script into a shell runs unreviewed code.", "no_pipe_to_shell", false},
	{"steps/toolCallRequest", "allow", "Recipients are named in the user's request.", "email_recipients", true},
	{"steps/agentResponse", "allow", "", "default_allow", false},
	{"steps/sessionEnd", "allow", "", "default_allow", false},
}

func timestamp(i int) string { return fmt.Sprintf("2026-03-14T14:02:%02d.%03dZ", 3+i, (i*137)%1000) }

func build() []entry {
	es := make([]entry, len(steps))
	for i, s := range steps {
		refs := []policyRef{{"acme-agent-policy", "2026.03.2", s.rule}}
		if s.egress {
			refs = append(refs, policyRef{"acme-egress-policy", "1.4.0", "allowed_recipients"})
		}
		rh := sha256.Sum256([]byte(fmt.Sprintf("params of step %d", i)))
		es[i] = entry{
			entryHead: entryHead{
				EntryID:     fmt.Sprintf("%08x-77a1-4c3e-9d20-%012x", 0x51c0e000+i, 0x6b2f0a10+i*29),
				StepID:      fmt.Sprintf("7c1e5a20-0000-4000-8000-%012d", i+1),
				StepType:    s.method,
				Timestamp:   timestamp(i),
				RequestHash: fmt.Sprintf("%x", rh),
			},
			AgentID:  "report-builder",
			Decision: decision{Disposition: s.disposition, Reasoning: s.reasoning, ReasonCodes: []string{}, PolicyReferences: refs},
		}
	}
	rehash(es, 0)
	return es
}

// rehash recomputes entries from..end as an honest ledger would.
func rehash(es []entry, from int) {
	for i := from; i < len(es); i++ {
		if i > 0 {
			p := es[i-1].EntryHash
			es[i].PreviousHash = &p
		} else {
			es[i].PreviousHash = nil
		}
		es[i].EntryHash = ""
		b, err := json.Marshal(es[i])
		if err != nil {
			log.Fatal(err)
		}
		e, err := acs.ParseEntry(b)
		if err != nil {
			log.Fatal(err)
		}
		var prev *acs.Hash
		if es[i].PreviousHash != nil {
			h, _ := acs.ParseHash(*es[i].PreviousHash)
			prev = &h
		}
		es[i].EntryHash = acs.EntryHash(e.Content, prev).String()
	}
}

// keys are the corpus's fixed keys.
type keys struct {
	ecdsa, mldsa, hybrid, hmac *sig.PrivateKey
	logEd, logML               string // signer keys
	logVKeys                   []string
	witnesses                  []string // signer keys of the three witnesses
	witnessVKeys               []string
}

func privateKey(keyID string, alg sig.Algorithm, private []byte) *sig.PrivateKey {
	doc, _ := json.Marshal(map[string]string{"key_id": keyID, "algorithm": string(alg), "private": base64.StdEncoding.EncodeToString(private)})
	k, err := sig.ParsePrivateKey(doc)
	if err != nil {
		log.Fatalf("%s: %v", keyID, err)
	}
	return k
}

func makeKeys() keys {
	var k keys
	s := seed("ecdsa")
	ek, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), s[:])
	if err != nil {
		log.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(ek)
	if err != nil {
		log.Fatal(err)
	}
	k.ecdsa = privateKey("guardian-ecdsa-1", sig.ECDSAP256, der)
	s = seed("mldsa65")
	k.mldsa = privateKey("guardian-mldsa65-1", sig.MLDSA65, s[:])
	s = seed("hybrid")
	k.hybrid = privateKey("guardian-hybrid-1", sig.MLDSA65ECDSAP256, sig.EncodeHybrid(s[:], der))
	k.hmac, err = sig.NewHMACKey(hmacKeyID, hmacIKM)
	if err != nil {
		log.Fatal(err)
	}
	mk := func(name string, alg ltlog.Algorithm) (string, string) {
		skey, vkey, err := ltlog.KeyFromSeed(name, alg, seed(name))
		if err != nil {
			log.Fatal(err)
		}
		return skey, vkey
	}
	var v string
	k.logEd, v = mk(origin, ltlog.Ed25519)
	k.logVKeys = append(k.logVKeys, v)
	k.logML, v = mk(origin, ltlog.CosignatureMLDSA44)
	k.logVKeys = append(k.logVKeys, v)
	for _, w := range []struct {
		name string
		alg  ltlog.Algorithm
	}{{"witness.alpha.example", ltlog.CosignatureEd25519}, {"witness.beta.example", ltlog.CosignatureMLDSA44}, {"witness.gamma.example", ltlog.CosignatureEd25519}} {
		sk, vk := mk(w.name, w.alg)
		k.witnesses = append(k.witnesses, sk)
		k.witnessVKeys = append(k.witnessVKeys, vk)
	}
	return k
}

func pub(k *sig.PrivateKey) json.RawMessage {
	b, err := k.Public().MarshalPublic()
	if err != nil {
		log.Fatal(err)
	}
	return b
}

// respond returns the signed response the Guardian sent for each entry.
func respond(es []entry, key *sig.PrivateKey) []json.RawMessage {
	signer, err := key.Signer(sessionID)
	if err != nil {
		log.Fatal(err)
	}
	var out []json.RawMessage
	for i, e := range es {
		result := map[string]any{"type": "final", "acs_version": "0.1.0", "request_id": e.StepID,
			"decision": e.Decision.Disposition, "policy_references": e.Decision.PolicyReferences, "chain_hash": e.EntryHash}
		if e.Decision.Reasoning != "" {
			result["reasoning"] = e.Decision.Reasoning
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": i + 1, "result": result})
		signed, err := sig.SignEnvelope(b, sig.Result, signer)
		if err != nil {
			log.Fatal(err)
		}
		out = append(out, signed)
	}
	return out
}

// logState is the Merkle log: leaves of other sessions interleaved with
// this session's, checkpoints after entry 4 and after the last entry.
type logState struct {
	hashes      []tlog.Hash
	n           int64
	leafIndex   map[int]int64 // position in the session -> leaf index
	checkpoints []int64       // sizes
}

func (l *logState) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = l.hashes[x]
	}
	return out, nil
}

func (l *logState) add(data []byte) int64 {
	hs, err := tlog.StoredHashes(l.n, data, l)
	if err != nil {
		log.Fatal(err)
	}
	l.hashes = append(l.hashes, hs...)
	l.n++
	return l.n - 1
}

func leafBytes(session string, pos int64, entryHash string) []byte {
	h, err := acs.ParseHash(entryHash)
	if err != nil {
		log.Fatal(err)
	}
	b, err := ltlog.Leaf{SessionID: session, Position: pos, EntryHash: h}.MarshalJCS()
	if err != nil {
		log.Fatal(err)
	}
	return b
}

func buildLog(es []entry) *logState {
	l := &logState{leafIndex: map[int]int64{}}
	other := func(k int) {
		l.add(leafBytes("sess-other-"+fmt.Sprint(k%3), int64(k/3), fmt.Sprintf("%x", sha256.Sum256([]byte{byte(k)}))))
	}
	k := 0
	for i, e := range es {
		other(k)
		k++
		if i%2 == 0 {
			other(k)
			k++
		}
		l.leafIndex[i] = l.add(leafBytes(sessionID, int64(i), e.EntryHash))
		if i == 4 {
			l.checkpoints = append(l.checkpoints, l.n)
		}
	}
	other(k)
	l.checkpoints = append(l.checkpoints, l.n)
	return l
}

func (l *logState) root(size int64) tlog.Hash {
	h, err := tlog.TreeHash(size, l)
	if err != nil {
		log.Fatal(err)
	}
	return h
}

type bundle struct {
	Format            string            `json:"format"`
	Version           int               `json:"version"`
	SessionID         string            `json:"session_id"`
	Keys              bundleKeys        `json:"keys"`
	PolicyBundles     []policyRecord    `json:"policy_bundles"`
	Checkpoints       []string          `json:"checkpoints"`
	ConsistencyProofs []consistency     `json:"consistency_proofs"`
	Anchors           []anchor          `json:"anchors"`
	Responses         []json.RawMessage `json:"responses,omitempty"`
	Entries           []entry           `json:"entries,omitempty"`
	Steps             []stepRecord      `json:"steps,omitempty"`
}

// stepRecord is an element of "steps": an entry with its response.
type stepRecord struct {
	Entry    entry           `json:"entry"`
	Response json.RawMessage `json:"response,omitempty"`
}

// toSteps moves a bundle's responses next to their entries (response i
// with entry i), the layout that keeps a verifier's memory flat.
func toSteps(b bundle) bundle {
	for i, e := range b.Entries {
		st := stepRecord{Entry: e}
		if i < len(b.Responses) {
			st.Response = b.Responses[i]
		}
		b.Steps = append(b.Steps, st)
	}
	b.Entries, b.Responses = nil, nil
	return b
}

type bundleKeys struct {
	ResponseKeys  []json.RawMessage `json:"response_keys,omitempty"`
	LogKeys       []string          `json:"log_keys,omitempty"`
	Witnesses     []string          `json:"witnesses,omitempty"`
	WitnessQuorum int               `json:"witness_quorum,omitempty"`
}

type policyRecord struct {
	PolicyID      string `json:"policy_id"`
	PolicyVersion string `json:"policy_version"`
	Digest        string `json:"digest"`
	RecordedAt    string `json:"recorded_at"`
	Content       []byte `json:"content,omitempty"`
}

type consistency struct {
	OldSize int64    `json:"old_size"`
	NewSize int64    `json:"new_size"`
	Proof   [][]byte `json:"proof"`
}

type anchor struct {
	Position  int      `json:"position"`
	LeafIndex int64    `json:"leaf_index"`
	TreeSize  int64    `json:"tree_size"`
	Proof     [][]byte `json:"proof"`
}

func policies() []policyRecord {
	mk := func(id, version, recorded string, content string) policyRecord {
		d := sha256.Sum256([]byte(content))
		return policyRecord{id, version, fmt.Sprintf("%x", d), recorded, []byte(content)}
	}
	return []policyRecord{
		mk("acme-agent-policy", "2026.03.2", "2026-03-10T09:00:00Z", `{"id":"acme-agent-policy","modules":{"main.rego":"package acs\n\ndefault decision := \"allow\"\n"},"version":"2026.03.2"}`),
		mk("acme-egress-policy", "1.4.0", "2026-03-12T17:30:00.250Z", `{"id":"acme-egress-policy","modules":{"egress.rego":"package egress\n\nallowed_recipients := {\"example.com\"}\n"},"version":"1.4.0"}`),
	}
}

// signCheckpoint signs the checkpoint of size n with the log's two keys
// and the first two witnesses (the quorum is 2 of 3).
func signCheckpoint(k keys, l *logState, n int64) string {
	root := l.root(n)
	text := fmt.Sprintf("%s\n%d\n%s\n", origin, n, base64.StdEncoding.EncodeToString(root[:]))
	now := func() time.Time { return time.Date(2026, 3, 14, 14, 5, 0, 0, time.UTC) }
	var signers []note.Signer
	for _, sk := range []string{k.logEd, k.logML, k.witnesses[0], k.witnesses[1]} {
		s, err := ltlog.NewSigner(sk, now)
		if err != nil {
			log.Fatal(err)
		}
		signers = append(signers, s)
	}
	msg, err := note.Sign(&note.Note{Text: text}, signers...)
	if err != nil {
		log.Fatal(err)
	}
	return string(msg)
}

func hashes(hs []tlog.Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i, h := range hs {
		out[i] = append([]byte(nil), h[:]...)
	}
	return out
}

// assemble makes a complete bundle of es with its responses and log.
func assemble(k keys, es []entry, responses []json.RawMessage, respKey *sig.PrivateKey) bundle {
	l := buildLog(es)
	b := bundle{
		Format: "acsledger-evidence-bundle", Version: 1, SessionID: sessionID,
		Keys:          bundleKeys{LogKeys: k.logVKeys, Witnesses: k.witnessVKeys, WitnessQuorum: 2},
		PolicyBundles: policies(), Responses: responses, Entries: es,
	}
	if !respKey.Algorithm().Symmetric() {
		b.Keys.ResponseKeys = []json.RawMessage{pub(respKey)}
	}
	for _, n := range l.checkpoints {
		b.Checkpoints = append(b.Checkpoints, signCheckpoint(k, l, n))
	}
	p, err := tlog.ProveTree(l.checkpoints[1], l.checkpoints[0], l)
	if err != nil {
		log.Fatal(err)
	}
	b.ConsistencyProofs = []consistency{{l.checkpoints[0], l.checkpoints[1], hashes(p)}}
	for ci, pos := range []int{4, len(es) - 1} {
		size := l.checkpoints[ci]
		rp, err := tlog.ProveRecord(size, l.leafIndex[pos], l)
		if err != nil {
			log.Fatal(err)
		}
		b.Anchors = append(b.Anchors, anchor{pos, l.leafIndex[pos], size, hashes(rp)})
	}
	return b
}

type manifestCase struct {
	File     string    `json:"file"`
	Mutation string    `json:"mutation"`
	Trust    bool      `json:"trust"`
	HMACIKM  string    `json:"hmac_ikm,omitempty"`
	Findings []finding `json:"findings"`
	Notices  []finding `json:"notices"`
}

func main() {
	log.SetFlags(0)
	if err := os.MkdirAll("bundles", 0o755); err != nil {
		log.Fatal(err)
	}
	k := makeKeys()
	valid := build()
	clone := func() []entry { return append([]entry(nil), valid...) }
	var cases []manifestCase
	write := func(file, mutation string, b bundle, trust bool, ikm string, findings []finding, notices ...finding) {
		writeJSON("bundles", file, b, " ")
		cases = append(cases, manifestCase{file, mutation, trust, ikm, orNone(findings), orNone(notices)})
	}
	// tamper writes an ECDSA-P256 bundle of the valid session after change
	// has tampered with it, to be checked with trust.json.
	tamper := func(file, mutation string, change func(b *bundle), findings []finding, notices ...finding) {
		b := assemble(k, valid, respond(valid, k.ecdsa), k.ecdsa)
		change(&b)
		write(file, mutation, b, true, "", findings, notices...)
	}
	ikm := fmt.Sprintf("%s=%x", hmacKeyID, hmacIKM)

	good := assemble(k, valid, respond(valid, k.ecdsa), k.ecdsa)
	write("valid.json", "none: ECDSA-P256 responses", good, true, "", nil)
	write("valid.json", "none, checked with the keys the bundle carries", good, false, "", nil,
		finding{"keys_from_bundle", -1}, finding{"keys_from_bundle", -1}, finding{"keys_from_bundle", -1})
	write("valid_mldsa65.json", "none: ML-DSA-65 responses", assemble(k, valid, respond(valid, k.mldsa), k.mldsa), true, "", nil)
	write("valid_hybrid.json", "none: ML-DSA-65+ECDSA-P256 responses", assemble(k, valid, respond(valid, k.hybrid), k.hybrid), true, "", nil)
	hm := assemble(k, valid, respond(valid, k.hmac), k.hmac)
	write("valid_hmac.json", "none: HMAC-SHA256 responses, IKM given", hm, true, ikm, nil)
	var unverifiable []finding
	for range valid {
		unverifiable = append(unverifiable, finding{"unverifiable_hmac", -1})
	}
	write("valid_hmac.json", "none: HMAC-SHA256 responses, IKM not given", hm, true, "", nil, unverifiable...)

	// The DENY of entry 5 rewritten into an ALLOW and the chain re-hashed
	// forward before it was logged: chain and log agree, the signed heads
	// do not.
	es := clone()
	es[5].Decision = decision{Disposition: "allow", ReasonCodes: []string{}, PolicyReferences: []policyRef{{"acme-agent-policy", "2026.03.2", "default_allow"}}}
	rehash(es, 5)
	write("chain_mismatch.json", "entry 5's deny rewritten to allow, chain re-hashed forward and logged; responses as signed", assemble(k, es, respond(valid, k.ecdsa), k.ecdsa), true, "",
		[]finding{{"chain_mismatch", 5}})

	write("chain_mismatch_steps.json", "as chain_mismatch.json, each response beside its entry in \"steps\"", toSteps(assemble(k, es, respond(valid, k.ecdsa), k.ecdsa)), true, "",
		[]finding{{"chain_mismatch", 5}})
	write("valid_steps.json", "none: ECDSA-P256 responses, each beside its entry in \"steps\"", toSteps(good), true, "", nil)

	tamper("response_signature_invalid.json", "response 5's deny edited into an allow, signature kept",
		func(b *bundle) {
			b.Responses[5] = bytes.Replace(b.Responses[5], []byte(`"decision":"deny"`), []byte(`"decision":"allow"`), 1)
		},
		[]finding{{"response_signature_invalid", 5}})

	cut := valid[:len(valid)-1]
	write("response_without_entry.json", "the last entry cut off (and logged without it); its signed response kept", assemble(k, cut, respond(valid, k.ecdsa), k.ecdsa), true, "",
		[]finding{{"response_without_entry", -1}})

	tamper("entry_without_response.json", "the response for entry 3 left out",
		func(b *bundle) { b.Responses = append(b.Responses[:3:3], b.Responses[4:]...) },
		[]finding{{"entry_without_response", 3}})

	tamper("checkpoint_signature_invalid.json", "one byte of the log's Ed25519 signature on checkpoint 1 flipped",
		func(b *bundle) { b.Checkpoints[1] = mangleSig(b.Checkpoints[1], origin, 0) },
		[]finding{{"checkpoint_signature_invalid", -1}})

	tamper("witness_quorum_not_met.json", "witness beta's cosignature removed from checkpoint 1: 1 of 3, quorum 2",
		func(b *bundle) { b.Checkpoints[1] = dropSig(b.Checkpoints[1], "witness.beta.example") },
		[]finding{{"witness_quorum_not_met", -1}})

	tamper("not_anchored.json", "the inclusion proof of the last entry left out",
		func(b *bundle) { b.Anchors = b.Anchors[:1] },
		[]finding{{"not_anchored", 5}})

	tamper("anchor_without_entry.json", "the last entry and its response cut off after logging; the anchor of the real head kept",
		func(b *bundle) {
			b.Entries = b.Entries[:len(b.Entries)-1]
			b.Responses = b.Responses[:len(b.Responses)-1]
		},
		[]finding{{"anchor_without_entry", -1}})

	tamper("inclusion_proof_invalid.json", "one byte of the last entry's inclusion proof flipped",
		func(b *bundle) { b.Anchors[1].Proof[0][7] ^= 0x20 },
		[]finding{{"inclusion_proof_invalid", len(valid) - 1}})

	tamper("consistency_proof_invalid.json", "one byte of the consistency proof between the checkpoints flipped",
		func(b *bundle) { b.ConsistencyProofs[0].Proof[0][0] ^= 0x01 },
		[]finding{{"consistency_proof_invalid", -1}})

	tamper("policy_unresolved.json", "the egress policy bundle entry 6 cites left out",
		func(b *bundle) { b.PolicyBundles = b.PolicyBundles[:1] },
		[]finding{{"policy_unresolved", 6}})

	tamper("policy_recorded_after_decision.json", "the egress policy's recorded_at moved 1 ms after entry 6's decision",
		func(b *bundle) {
			b.PolicyBundles[1].RecordedAt = "2026-03-14T14:02:09.823Z" // entry 6 was decided at 14:02:09.822
		},
		[]finding{{"policy_recorded_after_decision", 6}})

	tamper("policy_digest_mismatch.json", "the egress policy's content edited, digest kept",
		func(b *bundle) {
			b.PolicyBundles[1].Content = bytes.Replace(b.PolicyBundles[1].Content, []byte("example.com"), []byte("example.net"), 1)
		},
		[]finding{{"policy_digest_mismatch", -1}})

	tamper("no_responses.json", "the responses left out: no published head can be checked",
		func(b *bundle) { b.Responses = nil },
		nil, finding{"heads_not_checked", -1})

	writeSince(k, valid)

	trust := bundleKeys{ResponseKeys: []json.RawMessage{pub(k.ecdsa), pub(k.mldsa), pub(k.hybrid)}, LogKeys: k.logVKeys, Witnesses: k.witnessVKeys, WitnessQuorum: 2}
	writeJSON("bundles", "trust.json", trust, " ")
	m := map[string]any{
		"comment": "Written by gen_bundles.go. Each case checks a bundle with trust.json (when trust is true) and the HMAC IKM (when given), and lists the findings and notices (code, 0-based entry_index, -1 for none) verify must report, in order, and nothing else.",
		"session": sessionID,
		"cases":   cases,
	}
	writeJSON("bundles", "manifest.json", m, "  ")
}

// writeSince writes the bundles `acsverify bundle --since` compares with
// valid.json as the later bundle (verify/since_test.go lists what each
// gives): since_earlier.json is the same session exported when the log's
// first checkpoint was the latest, so valid.json extends it; the others are
// later bundles that each verify on their own but do not extend it.
func writeSince(k keys, valid []entry) {
	put := func(file string, b bundle) { writeJSON("bundles", file, b, " ") }
	// Entries 0..4 and the checkpoint after entry 4, which anchors entry 4.
	b := assemble(k, valid, respond(valid, k.ecdsa), k.ecdsa)
	l := buildLog(valid)
	b.Entries, b.Responses = b.Entries[:5], b.Responses[:5]
	b.Checkpoints, b.ConsistencyProofs, b.Anchors = b.Checkpoints[:1], []consistency{}, b.Anchors[:1]
	if b.Anchors[0].TreeSize != l.checkpoints[0] || b.Anchors[0].Position != 4 {
		log.Fatal("since_earlier.json: the first anchor is not entry 4 in the first checkpoint")
	}
	put("since_earlier.json", b)

	// valid.json cut to its first 3 entries, anchored by entry 2 in the
	// first checkpoint: the same log, a shorter session.
	b = assemble(k, valid, respond(valid, k.ecdsa), k.ecdsa)
	b.Entries, b.Responses = b.Entries[:3], b.Responses[:3]
	rp, err := tlog.ProveRecord(l.checkpoints[0], l.leafIndex[2], l)
	if err != nil {
		log.Fatal(err)
	}
	b.Anchors = []anchor{{2, l.leafIndex[2], l.checkpoints[0], hashes(rp)}}
	put("since_truncated.json", b)

	// Entry 2's decision rewritten, the chain re-hashed forward, every
	// response re-signed and the log rebuilt: a bundle that verifies.
	es := append([]entry(nil), valid...)
	es[2].Decision.Disposition = "deny"
	rehash(es, 2)
	put("since_rewritten.json", assemble(k, es, respond(es, k.ecdsa), k.ecdsa))

	// valid.json without the first checkpoint and its consistency proof:
	// nothing ties its log to the earlier bundle's checkpoint.
	b = assemble(k, valid, respond(valid, k.ecdsa), k.ecdsa)
	b.Checkpoints, b.ConsistencyProofs, b.Anchors = b.Checkpoints[1:], []consistency{}, b.Anchors[1:]
	put("since_unproven.json", b)
}

// mangleSig flips one bit of the signature by the first signature line
// named name, after the 4-byte key ID, at byte at of the signature.
func mangleSig(msg, name string, at int) string {
	lines := bytes.SplitAfter([]byte(msg), []byte("\n"))
	for i, line := range lines {
		prefix := []byte("\u2014 " + name + " ")
		if !bytes.HasPrefix(line, prefix) {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(line[len(prefix):])))
		if err != nil {
			log.Fatal(err)
		}
		raw[4+at] ^= 0x01
		lines[i] = []byte(fmt.Sprintf("%s%s\n", prefix, base64.StdEncoding.EncodeToString(raw)))
		return string(bytes.Join(lines, nil))
	}
	log.Fatalf("no signature by %s", name)
	return ""
}

// dropSig removes the signature lines named name.
func dropSig(msg, name string) string {
	var out []byte
	for _, line := range bytes.SplitAfter([]byte(msg), []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("\u2014 "+name+" ")) {
			out = append(out, line...)
		}
	}
	return string(out)
}
