package verify

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/acs/sig"
)

type strictManifest struct {
	Session string `json:"session"`
	Chains  []struct {
		Entries   string `json:"entries"`
		Responses string `json:"responses"`
		Keys      bool   `json:"keys"`
		Strict    bool   `json:"require_signed_heads"`
		verdict
	} `json:"chains"`
	Bundles []struct {
		File  string `json:"file"`
		Trust bool   `json:"trust"`
		verdict
	} `json:"bundles"`
}

// checkVerdict requires exactly the findings and notices v lists, in order,
// each with a message and a location.
func checkVerdict(t *testing.T, r *Report, v verdict) {
	t.Helper()
	if got, want := codes(r.Findings), wantCodes(v.Findings); !slices.Equal(got, want) {
		t.Errorf("findings = %v, want %v\n%v", got, want, r.Findings)
	}
	if got, want := codes(r.Notices), wantCodes(v.Notices); !slices.Equal(got, want) {
		t.Errorf("notices = %v, want %v", got, want)
	}
	if r.Verified() != (len(v.Findings) == 0) {
		t.Errorf("Verified() = %v with findings %v", r.Verified(), r.Findings)
	}
	for _, f := range append(r.Findings, r.Notices...) {
		if f.Message == "" || (f.EntryIndex < 0 && f.Where == "") || (f.EntryIndex >= 0 && f.Code != CodeUnverifiableHMAC && f.EntryID == "") {
			t.Errorf("finding without message or location: %+v", f)
		}
	}
}

// TestRequireSignedHeadsCorpus checks the cases of testdata/heads: chains
// against ECDSA-P256, HMAC-SHA256 and mixed heads, and bundles of the bundle
// corpus, with RequireSignedHeads.
func TestRequireSignedHeadsCorpus(t *testing.T) {
	t.Parallel()
	m := readManifestFile(t, "heads", func(m strictManifest) int { return len(m.Chains) + len(m.Bundles) })
	kd, err := sig.LoadKeyDir(filepath.Join("testdata", "heads"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range m.Chains {
		t.Run("chain/"+c.Entries+"+"+c.Responses+"/"+c.Mutation, func(t *testing.T) {
			t.Parallel()
			keys := new(sig.KeySet)
			if c.Keys {
				keys = addKeys(t, keys, kd.KeySet)
			}
			if c.HMACIKM != "" {
				k, err := sig.ParseHMACKeyFlag(c.HMACIKM)
				if err != nil {
					t.Fatal(err)
				}
				if err := keys.Add(k.Public()); err != nil {
					t.Fatal(err)
				}
			}
			hc := NewHeadChecker(keys, m.Session)
			if c.Strict {
				hc.RequireSignedHeads(keys)
			}
			r, err := hc.VerifyChain(openTestFile(t, "testdata", "corpus", c.Entries), openTestFile(t, "testdata", "heads", c.Responses))
			if err != nil {
				t.Fatalf("VerifyChain: %v", err)
			}
			checkVerdict(t, r, c.verdict)
		})
	}
	for _, c := range m.Bundles {
		t.Run("bundle/"+c.File+"/"+c.Mutation, func(t *testing.T) {
			t.Parallel()
			trust := &Trust{}
			if c.Trust {
				trust = readTrust(t, c.HMACIKM)
			}
			trust.RequireSignedHeads = true
			r, err := VerifyBundle(openTestFile(t, "testdata", "bundles", c.File), trust)
			if err != nil {
				t.Fatalf("VerifyBundle: %v", err)
			}
			checkVerdict(t, r, c.verdict)
		})
	}
}

func addKeys(t *testing.T, dst, src *sig.KeySet) *sig.KeySet {
	t.Helper()
	for _, id := range src.KeyIDs() {
		k, _ := src.Get(id)
		if err := dst.Add(k); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestRequireSignedHeadsMessage checks that head_unauthenticated says why
// the heads do not count: an HMAC key whose secret was given is named as
// one its holders could have signed with.
func TestRequireSignedHeadsMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, ikm, want, actual string
	}{
		{"hmac given", "guardian-ikm-1=6163736c65646765722074616d70657220636f7270757320494b4d2c20333242", "whoever holds that secret", "HMAC-SHA256/guardian-ikm-1"},
		{"hmac not given", "", "whose secret was not given", "HMAC-SHA256/guardian-ikm-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			keys := new(sig.KeySet)
			if tc.ikm != "" {
				k, err := sig.ParseHMACKeyFlag(tc.ikm)
				if err != nil {
					t.Fatal(err)
				}
				keys.Add(k.Public())
			}
			hc := NewHeadChecker(keys, corpusSession)
			hc.RequireSignedHeads(keys)
			r, err := hc.VerifyChain(openCorpus(t, "valid.jsonl"), openCorpus(t, "valid.responses.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Findings) != 1 {
				t.Fatalf("findings = %v, want one head_unauthenticated", r.Findings)
			}
			f := r.Findings[0]
			if f.Code != CodeHeadUnauthenticated || f.EntryIndex != 0 || f.Actual != tc.actual ||
				!strings.Contains(f.Message, tc.want) || !strings.Contains(f.Message, "entries 0 to 9") {
				t.Errorf("finding = %+v, want head_unauthenticated at 0, actual %q, message saying %q", f, tc.actual, tc.want)
			}
		})
	}
}

// FuzzRequireSignedHeads feeds arbitrary bytes as the response file of the
// valid chain, checked with RequireSignedHeads and the ECDSA-P256 key of
// testdata/heads: it must never panic, a report must be consistent, and
// head_unauthenticated comes at most once, at an entry.
func FuzzRequireSignedHeads(f *testing.F) {
	entries := readTestFile(f, "testdata", "corpus", "valid.jsonl")
	for _, name := range []string{"ecdsa.responses.jsonl", "ecdsa_then_hmac.responses.jsonl", "hmac_then_ecdsa.responses.jsonl", "ecdsa_last_missing.responses.jsonl"} {
		f.Add(readTestFile(f, "testdata", "heads", name))
	}
	f.Add(readTestFile(f, "testdata", "corpus", "valid.responses.jsonl"))
	kd, err := sig.LoadKeyDir(filepath.Join("testdata", "heads"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		hc := NewHeadChecker(kd.KeySet, corpusSession)
		hc.RequireSignedHeads(kd.KeySet)
		r, err := hc.VerifyChain(bytes.NewReader(entries), bytes.NewReader(data))
		if err != nil {
			return // input errors are FuzzVerifyChainHeads's
		}
		checkReport(t, r)
		n := 0
		for _, f := range r.Findings {
			if f.Code != CodeHeadUnauthenticated {
				continue
			}
			n++
			if f.EntryIndex < 0 || f.EntryIndex >= r.Entries || f.EntryID == "" {
				t.Fatalf("head_unauthenticated not at an entry: %+v", f)
			}
		}
		if n > 1 {
			t.Fatalf("%d head_unauthenticated findings, want at most one", n)
		}
	})
}
