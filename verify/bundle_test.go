package verify

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/acs/sig"
)

type bundleManifest struct {
	Session string `json:"session"`
	Cases   []struct {
		File  string `json:"file"`
		Trust bool   `json:"trust"`
		verdict
	} `json:"cases"`
}

// readTrust reads testdata/bundles/trust.json into a Trust, adding the
// HMAC IKM flag value ikm if not "".
func readTrust(t testing.TB, ikm string) *Trust {
	t.Helper()
	b := readTestFile(t, "testdata", "bundles", "trust.json")
	tr, err := ParseTrust(b)
	if err != nil {
		t.Fatalf("trust.json: %v", err)
	}
	if ikm != "" {
		k, err := sig.ParseHMACKeyFlag(ikm)
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.ResponseKeys.Add(k.Public()); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// TestBundleCorpus checks every bundle of the tamper corpus and requires
// exactly the findings and notices its manifest lists, in order.
func TestBundleCorpus(t *testing.T) {
	t.Parallel()
	m := readManifestFile(t, "bundles", func(m bundleManifest) int { return len(m.Cases) })
	seen := map[string]bool{}
	for _, c := range m.Cases {
		t.Run(c.File+"/"+c.Mutation, func(t *testing.T) {
			t.Parallel()
			f := openTestFile(t, "testdata", "bundles", c.File)
			var trust *Trust
			if c.Trust {
				trust = readTrust(t, c.HMACIKM)
			}
			r, err := VerifyBundle(f, trust)
			if err != nil {
				t.Fatalf("VerifyBundle: %v", err)
			}
			if got, want := codes(r.Findings), wantCodes(c.Findings); !slices.Equal(got, want) {
				t.Errorf("findings = %v, want %v\n%v", got, want, r.Findings)
			}
			if got, want := codes(r.Notices), wantCodes(c.Notices); !slices.Equal(got, want) {
				t.Errorf("notices = %v, want %v\n%v", got, want, r.Notices)
			}
			if r.Verified() != (len(c.Findings) == 0) {
				t.Errorf("Verified() = %v with findings %v", r.Verified(), r.Findings)
			}
			for _, f := range append(r.Findings, r.Notices...) {
				if f.Message == "" || (f.EntryIndex < 0 && f.Where == "") || (f.EntryIndex >= 0 && f.EntryID == "") {
					t.Errorf("finding without message or location: %+v", f)
				}
			}
		})
		for _, f := range append(c.Findings, c.Notices...) {
			seen[f.Code] = true
		}
	}
	for _, code := range []string{
		CodeChainMismatch, CodeResponseSignatureInvalid, CodeResponseWithoutEntry, CodeEntryWithoutResponse, CodeUnverifiableHMAC,
		CodeCheckpointSignatureInvalid, CodeWitnessQuorumNotMet, CodeNotAnchored, CodeInclusionProofInvalid, CodeAnchorWithoutEntry, CodeConsistencyProofInvalid,
		CodePolicyUnresolved, CodePolicyRecordedAfterDecision, CodePolicyDigestMismatch, CodeKeysFromBundle, CodeHeadsNotChecked,
	} {
		if !seen[code] {
			t.Errorf("no bundle case produces %s", code)
		}
	}
}

// TestBundleInputErrors: bundles that cannot be read name the member and
// the problem, and give no report.
func TestBundleInputErrors(t *testing.T) {
	t.Parallel()
	head := `{"format":"acsledger-evidence-bundle","version":1,"session_id":"s",`
	entry := `{"entry_id":"a","step_id":"b","step_type":"steps/x","previous_hash":null}`
	for _, c := range []struct{ in, member, want string }{
		{`[]`, "", "a bundle is a JSON object"},
		{head + `"keys":{"log_keys":["nope"]},"entries":[` + entry + `]}`, "keys", "log_keys[0]"},
		{head + `"keys":{"response_keys":[{"key_id":"k","algorithm":"ECDSA-P256","public":"AAAA"}]},"entries":[` + entry + `]}`, "keys", "response_keys[0]"},
		{head + `"keys":{"extra":1},"entries":[` + entry + `]}`, "keys", "unknown field"},
		{head + `"anchors":[{"position":0,"leaf_index":0,"tree_size":5,"proof":[]}],"entries":[` + entry + `]}`, "anchors", "tree_size 5"},
		{head + `"policy_bundles":[{"policy_id":"p","policy_version":"1","digest":"00","recorded_at":"2026-01-01T00:00:00Z"}],"entries":[` + entry + `]}`, "policy_bundles", "digest"},
		{head + `"entries":[]}`, "entries", "no context entries"},
		{head + `"entries":[` + entry + `]} {}`, "", "data after"},
		{head + `"entries":[` + entry + `],"steps":[]}`, "steps", "not both"},
		{head + `"entries":[{"entry_id":1}]}`, "entries", "[0]"},
		{head + `"steps":[{"entry":` + entry + `,"extra":1}]}`, "steps", "unknown field"},
	} {
		_, err := VerifyBundle(strings.NewReader(c.in), nil)
		var ie *InputError
		if !errors.As(err, &ie) {
			t.Errorf("%s: error %v, want an *InputError", c.in, err)
			continue
		}
		if ie.Member != c.member || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q (member %q), want member %q and %q", c.in, err, ie.Member, c.member, c.want)
		}
	}
}

// TestCodesDocumented: every code constant of finding.go is one the fuzz
// targets accept and has a row in docs/findings.md.
func TestCodesDocumented(t *testing.T) {
	t.Parallel()
	src := readTestFile(t, "finding.go")
	doc := readTestFile(t, "..", "docs", "findings.md")
	n := 0
	for _, line := range strings.Split(string(src), "\n") {
		name, value, ok := strings.Cut(strings.TrimSpace(line), " = ")
		if !ok || !strings.HasPrefix(name, "Code") {
			continue
		}
		code := strings.Trim(value, `"`)
		n++
		if !knownCode(code) {
			t.Errorf("%s = %q is not in knownCode", name, code)
		}
		if !strings.Contains(string(doc), "| `"+code+"` |") {
			t.Errorf("docs/findings.md has no row for %s", code)
		}
	}
	if n < 20 {
		t.Fatalf("found only %d codes in finding.go", n)
	}
}
