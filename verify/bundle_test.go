package verify

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/acsledger/acsledger/acs/sig"
)

type bundleManifest struct {
	Session string `json:"session"`
	Cases   []struct {
		File     string        `json:"file"`
		Mutation string        `json:"mutation"`
		Trust    bool          `json:"trust"`
		HMACIKM  string        `json:"hmac_ikm"`
		Findings []codeAtIndex `json:"findings"`
		Notices  []codeAtIndex `json:"notices"`
	} `json:"cases"`
}

// readTrust reads testdata/bundles/trust.json into a Trust, adding the
// HMAC IKM flag value ikm if not "".
func readTrust(t testing.TB, ikm string) *Trust {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "bundles", "trust.json"))
	if err != nil {
		t.Fatal(err)
	}
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
	b, err := os.ReadFile(filepath.Join("testdata", "bundles", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m bundleManifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Cases) == 0 {
		t.Fatal("no cases")
	}
	seen := map[string]bool{}
	for _, c := range m.Cases {
		t.Run(c.File+"/"+c.Mutation, func(t *testing.T) {
			t.Parallel()
			f, err := os.Open(filepath.Join("testdata", "bundles", c.File))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
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
