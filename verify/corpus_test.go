package verify

import (
	"encoding/json"
	"slices"
	"strconv"
	"testing"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
)

type corpusManifest struct {
	Cases []struct {
		File     string        `json:"file"`
		Entries  int           `json:"entries"`
		Head     string        `json:"head"`
		Findings []codeAtIndex `json:"findings"`
	} `json:"cases"`
	Heads []struct {
		Entries   string `json:"entries"`
		Responses string `json:"responses"`
		Session   string `json:"session"`
		verdict
	} `json:"heads"`
	Requests []struct {
		Params      json.RawMessage `json:"params"`
		RequestHash string          `json:"request_hash"`
	} `json:"requests"`
}

// verdict is what a manifest expects of a case that signed responses
// take part in: the mutation made, the HMAC IKM the check is given
// (KEY_ID=HEX, or ""), and the findings and notices, in order.
type verdict struct {
	Mutation string        `json:"mutation"`
	HMACIKM  string        `json:"hmac_ikm"`
	Findings []codeAtIndex `json:"findings"`
	Notices  []codeAtIndex `json:"notices"`
}

type codeAtIndex struct {
	Code       string `json:"code"`
	EntryIndex int    `json:"entry_index"`
}

// codes lists findings as wantCodes lists a manifest's.
func codes(fs []Finding) []string {
	cs := make([]codeAtIndex, len(fs))
	for i, f := range fs {
		cs[i] = codeAtIndex{f.Code, f.EntryIndex}
	}
	return wantCodes(cs)
}

func wantCodes(fs []codeAtIndex) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Code+"@"+strconv.Itoa(f.EntryIndex))
	}
	return out
}

// TestCorpusHeads checks chains of the corpus against files of signed
// responses and requires exactly the findings and notices the manifest
// lists, in order.
func TestCorpusHeads(t *testing.T) {
	t.Parallel()
	m := readManifest(t)
	seen := map[string]bool{}
	for _, c := range m.Heads {
		t.Run(c.Entries+"+"+c.Responses+"/"+c.Mutation, func(t *testing.T) {
			t.Parallel()
			entries := openTestFile(t, "testdata", "corpus", c.Entries)
			responses := openTestFile(t, "testdata", "corpus", c.Responses)
			keys := new(sig.KeySet)
			if c.HMACIKM != "" {
				k, err := sig.ParseHMACKeyFlag(c.HMACIKM)
				if err != nil {
					t.Fatal(err)
				}
				if err := keys.Add(k.Public()); err != nil {
					t.Fatal(err)
				}
			}
			r, err := VerifyChainHeads(entries, responses, keys, c.Session)
			if err != nil {
				t.Fatalf("VerifyChainHeads: %v", err)
			}
			if got, want := codes(r.Findings), wantCodes(c.Findings); !slices.Equal(got, want) {
				t.Errorf("findings = %v, want %v\n%v", got, want, r.Findings)
			}
			if got, want := codes(r.Notices), wantCodes(c.Notices); !slices.Equal(got, want) {
				t.Errorf("notices = %v, want %v", got, want)
			}
			for _, f := range append(r.Findings, r.Notices...) {
				if f.Message == "" || (f.EntryIndex < 0 && f.Where == "") {
					t.Errorf("finding without message or location: %+v", f)
				}
			}
		})
		for _, f := range append(c.Findings, c.Notices...) {
			seen[f.Code] = true
		}
	}
	for _, code := range []string{CodeChainMismatch, CodeResponseSignatureInvalid, CodeResponseWithoutEntry, CodeEntryWithoutResponse, CodeUnverifiableHMAC} {
		if !seen[code] {
			t.Errorf("no head case produces %s", code)
		}
	}
}

func readManifest(t testing.TB) corpusManifest {
	t.Helper()
	return readManifestFile(t, "corpus", func(m corpusManifest) int { return len(m.Cases) })
}

// readManifestFile reads testdata/dir/manifest.json, which must list at
// least one case.
func readManifestFile[M any](t testing.TB, dir string, cases func(M) int) M {
	t.Helper()
	b := readTestFile(t, "testdata", dir, "manifest.json")
	var m M
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s/manifest.json: %v", dir, err)
	}
	if cases(m) == 0 {
		t.Fatalf("%s/manifest.json lists no cases", dir)
	}
	return m
}

// TestCorpus replays every file of the tamper corpus and requires exactly
// the findings its manifest lists, in order, and nothing else.
func TestCorpus(t *testing.T) {
	t.Parallel()
	m := readManifest(t)
	covered := map[string]bool{}
	for _, c := range m.Cases {
		t.Run(c.File, func(t *testing.T) {
			t.Parallel()
			f := openTestFile(t, "testdata", "corpus", c.File)
			r, err := VerifyChain(f)
			if err != nil {
				t.Fatalf("VerifyChain: %v", err)
			}
			if got, want := codes(r.Findings), wantCodes(c.Findings); !slices.Equal(got, want) {
				t.Errorf("findings = %v, want %v\n%v", got, want, r.Findings)
			}
			if r.Verified() != (len(c.Findings) == 0) {
				t.Errorf("Verified() = %v with %d findings", r.Verified(), len(r.Findings))
			}
			if r.Entries != c.Entries {
				t.Errorf("Entries = %d, want %d", r.Entries, c.Entries)
			}
			if r.Head.String() != c.Head {
				t.Errorf("Head = %s, want %s", r.Head, c.Head)
			}
		})
		for _, f := range c.Findings {
			covered[f.Code] = true
		}
	}
	for _, code := range []string{CodeEntryHashMismatch, CodePreviousHashMismatch, CodeRootHasPrevious, CodeFork} {
		if !covered[code] {
			t.Errorf("no corpus file produces %s", code)
		}
	}
}

// TestCorpusRequestHash checks acs.RequestHash against the request_hash
// vectors the generator computed with gowebpki/jcs, since entries commit to
// requests through it.
func TestCorpusRequestHash(t *testing.T) {
	t.Parallel()
	m := readManifest(t)
	if len(m.Requests) == 0 {
		t.Fatal("manifest.json lists no request vectors")
	}
	for i, r := range m.Requests {
		h, err := acs.RequestHash(r.Params)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if h.String() != r.RequestHash {
			t.Errorf("request %d: RequestHash = %s, want %s", i, h, r.RequestHash)
		}
	}
}
