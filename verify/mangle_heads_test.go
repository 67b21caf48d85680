package verify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/gowebpki/jcs"
)

// signedResponse returns a response envelope for step stepID publishing
// head, signed with k for session sessionID.
func signedResponse(t testing.TB, k *sig.PrivateKey, sessionID, stepID string, head acs.Hash) []byte {
	t.Helper()
	s, err := k.Signer(sessionID)
	if err != nil {
		t.Fatal(err)
	}
	env := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"result":{"type":"final","acs_version":"0.1.0","request_id":%q,"decision":"deny","reasoning":"Piping a script into a shell.","chain_hash":%q}}`, stepID, head)
	out, err := sig.SignEnvelope([]byte(env), sig.Result, s)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMangleResponseSignatures signs a response with every ACS §10.1
// algorithm and flips one bit of each byte (each byte outside the
// signature value, a sample inside it): every changed response must be
// refused as input, fail its signature check, or (for an HMAC key_id
// changed into one whose IKM is unknown) be a notice; none may verify,
// unless the change leaves the RFC 8785 form unchanged, and then it must.
func TestMangleResponseSignatures(t *testing.T) {
	t.Parallel()
	const session = "sess-mangle-1"
	var head acs.Hash
	head[0] = 0xab
	for _, alg := range sig.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			t.Parallel()
			k, err := sig.GenerateKey(alg, "k-"+strings.ToLower(string(alg)))
			if err != nil {
				t.Fatal(err)
			}
			keys, err := sig.NewKeySet(k.Public())
			if err != nil {
				t.Fatal(err)
			}
			env := signedResponse(t, k, session, "req-1", head)
			// The findings about a response are held for the entry it
			// answers; with no entry, Finish returns them (beside
			// response_without_entry for a response that verifies).
			check := func(b []byte) (findings, notices []Finding, err error) {
				hc := NewHeadChecker(keys, session)
				findings, notices, err = hc.AddResponse(b)
				for _, f := range hc.Finish() {
					if f.Code != CodeResponseWithoutEntry {
						findings = append(findings, f)
					}
				}
				return findings, notices, err
			}
			if fs, ns, err := check(env); err != nil || len(fs) != 0 || len(ns) != 0 {
				t.Fatalf("the signed response does not verify: %v %v %v", fs, ns, err)
			}
			canon, err := jcs.Transform(env)
			if err != nil {
				t.Fatal(err)
			}
			value := bytes.Index(env, []byte(`"value":"`))
			end := value + bytes.IndexByte(env[value+9:], '"') + 9
			step := 1
			if raceEnabled || testing.Short() {
				step = 7
			}
			tried := 0
			for i := 0; i < len(env); i += step {
				if i > value && i < end && (i-value)%61 != 0 {
					continue // sample inside the signature value
				}
				m := bytes.Clone(env)
				m[i] ^= 1 << (i % 8)
				tried++
				fs, ns, err := check(m)
				if c, cerr := jcs.Transform(m); cerr == nil && bytes.Equal(c, canon) {
					if err != nil || len(fs) != 0 {
						t.Errorf("byte %d: a change void under RFC 8785 fails: %v %v", i, fs, err)
					}
					continue
				}
				switch {
				case err != nil:
				case len(fs) == 1 && fs[0].Code == CodeResponseSignatureInvalid:
				case len(fs) == 0 && len(ns) == 1 && ns[0].Code == CodeUnverifiableHMAC && alg == sig.HMACSHA256:
				default:
					t.Errorf("byte %d (%q -> %q): findings %v, notices %v", i, env[i], m[i], fs, ns)
				}
			}
			if tried < 40 {
				t.Fatalf("only %d changes tried", tried)
			}
		})
	}
}

// TestMangleCheckpoint changes a valid checkpoint note of the corpus:
// flipping a bit of any signature must cost exactly that signature, edits
// of the text must cost every signature, a witness's cosignature repeated
// must count once, and a note that is not a signed note must be refused.
func TestMangleCheckpoint(t *testing.T) {
	t.Parallel()
	checkpoints := validBundleCheckpoints(t)
	note := checkpoints[1]
	trust := readTrust(t, "")
	policy := &trust.Checkpoint
	verifyNote := func(n string) ([]string, error) {
		_, fs, err := VerifyCheckpoint([]byte(n), policy, "checkpoint")
		return codes(fs), err
	}
	if got, err := verifyNote(note); err != nil || len(got) != 0 {
		t.Fatalf("valid checkpoint: %v %v", got, err)
	}

	text, sigs, _ := strings.Cut(note, "\n\n")
	lines := strings.SplitAfter(sigs, "\n")
	lines = lines[:len(lines)-1]
	if len(lines) != 4 {
		t.Fatalf("%d signature lines, want 4 (2 log, 2 witnesses)", len(lines))
	}
	// Which finding losing each signature line gives: the two log
	// signatures are each required, the two witnesses make the quorum.
	want := []string{"checkpoint_signature_invalid@-1", "checkpoint_signature_invalid@-1", "witness_quorum_not_met@-1", "witness_quorum_not_met@-1"}
	for li, line := range lines {
		name, b64, _ := strings.Cut(strings.TrimPrefix(strings.TrimSuffix(line, "\n"), "\u2014 "), " ")
		for pos := 0; pos < len(b64); pos += max(1, len(b64)/40) {
			raw := []byte(b64)
			raw[pos] ^= 0x01
			mangled := text + "\n\n" + strings.Join(lines[:li], "") + "\u2014 " + name + " " + string(raw) + "\n" + strings.Join(lines[li+1:], "")
			got, err := verifyNote(mangled)
			if err != nil {
				continue // no longer base64 of a key ID and a signature
			}
			if len(got) != 1 || got[0] != want[li] {
				t.Errorf("signature line %d (%s), byte %d flipped: %v, want [%s]", li, name, pos, got, want[li])
			}
		}
	}
	// The text edited: every signature is lost.
	edited := strings.Replace(note, "\n24\n", "\n25\n", 1)
	if edited == note {
		t.Fatal("checkpoint size is not 24")
	}
	if got, err := verifyNote(edited); err != nil || strings.Join(got, " ") != "checkpoint_signature_invalid@-1 checkpoint_signature_invalid@-1 witness_quorum_not_met@-1" {
		t.Errorf("text edited: %v %v", got, err)
	}
	// One witness's cosignature twice does not make two.
	twice := text + "\n\n" + lines[0] + lines[1] + lines[2] + lines[2]
	if got, err := verifyNote(twice); err != nil || strings.Join(got, " ") != "witness_quorum_not_met@-1" {
		t.Errorf("one witness twice: %v %v", got, err)
	}
	for name, bad := range map[string]string{
		"no signatures":    text + "\n",
		"no blank line":    strings.Replace(note, "\n\n", "\n", 1),
		"not an em dash":   text + "\n\n" + strings.Replace(lines[0], "\u2014", "-", 1),
		"bad root":         strings.Replace(note, text, strings.Replace(text, "=", "", 1), 1),
		"extension line":   strings.Replace(note, "\n\n", "\nextra\n\n", 1),
		"leading zero":     strings.Replace(note, "\n24\n", "\n024\n", 1),
		"invalid UTF-8":    "\xff" + note,
		"no final newline": strings.TrimSuffix(note, "\n"),
	} {
		if _, err := verifyNote(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestCheckpointNoLogKey: with no log key at all, nothing shows who signed
// a checkpoint, and that is a finding.
func TestCheckpointNoLogKey(t *testing.T) {
	t.Parallel()
	checkpoints := validBundleCheckpoints(t)
	cp, fs, err := VerifyCheckpoint([]byte(checkpoints[0]), nil, "checkpoints[0]")
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || fs[0].Code != CodeCheckpointSignatureInvalid || fs[0].Expected != "a trusted log key" {
		t.Errorf("findings %v", fs)
	}
	if cp.Origin != "log.acsledger.example/audit" || cp.Size == 0 {
		t.Errorf("checkpoint %+v", cp)
	}
}

// validBundleCheckpoints reads the checkpoint notes of the corpus's valid
// bundle.
func validBundleCheckpoints(t *testing.T) []string {
	t.Helper()
	b := readTestFile(t, "testdata", "bundles", "valid.json")
	var bundle struct {
		Checkpoints []string `json:"checkpoints"`
	}
	if err := json.Unmarshal(b, &bundle); err != nil {
		t.Fatal(err)
	}
	return bundle.Checkpoints
}
