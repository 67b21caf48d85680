package verify

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/acs/sig"
)

// FuzzVerifyChain feeds arbitrary bytes to the JSON Lines chain reader: it
// must never panic, an input error must name a line that exists, and a
// report must be consistent with itself.
func FuzzVerifyChain(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.jsonl"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no corpus files: %v", err)
	}
	for _, name := range files {
		b := readTestFile(f, name)
		f.Add(b)
	}
	f.Add([]byte(""))
	f.Add([]byte("\n\n{}\n"))
	f.Add([]byte(`{"entry_id":"a","step_id":"b","step_type":"c","entry_hash":null}` + "\n\n"))
	f.Add([]byte(`{"entry_id":"a","step_id":"b","step_type":"c","previous_hash":"` + strings.Repeat("0", 64) + `"}`))

	codes := map[string]bool{CodeEntryHashMismatch: true, CodePreviousHashMismatch: true, CodeRootHasPrevious: true, CodeFork: true}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := VerifyChain(bytes.NewReader(data))
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("error is not an *InputError: %v", err)
			}
			if lines := bytes.Count(data, []byte("\n")) + 1; ie.Line < 1 || ie.Line > lines {
				t.Fatalf("error names line %d of input with %d lines: %v", ie.Line, lines, err)
			}
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("line %d: ", ie.Line)) {
				t.Fatalf("error %q does not start with its line", err)
			}
			return
		}
		if r.Entries < 1 {
			t.Fatalf("report with %d entries", r.Entries)
		}
		last := -1
		for _, f := range r.Findings {
			if !codes[f.Code] || f.EntryIndex < last || f.EntryIndex >= r.Entries || f.Message == "" || f.Expected == f.Actual {
				t.Fatalf("bad finding %+v in a report of %d entries", f, r.Entries)
			}
			last = f.EntryIndex
		}
	})
}

// knownCode reports whether code is a documented finding or notice code.
func knownCode(code string) bool {
	switch code {
	case CodeEntryHashMismatch, CodePreviousHashMismatch, CodeRootHasPrevious, CodeFork,
		CodeChainMismatch, CodeResponseSignatureInvalid, CodeResponseWithoutEntry, CodeEntryWithoutResponse, CodeUnverifiableHMAC, CodeHeadUnauthenticated,
		CodeCheckpointSignatureInvalid, CodeWitnessQuorumNotMet, CodeNotAnchored, CodeInclusionProofInvalid, CodeAnchorWithoutEntry, CodeConsistencyProofInvalid,
		CodePolicyUnresolved, CodePolicyRecordedAfterDecision, CodePolicyDigestMismatch, CodeKeysFromBundle, CodeHeadsNotChecked,
		CodeLoggedEntryMissing, CodeLoggedEntryMismatch, CodeTruncated, CodeRewritten, CodeLogFork,
		CodePayloadMissing, CodePayloadMismatch, CodePayloadErased, CodeSourceInline,
		CodeReceiptSessionMismatch, CodeReceiptPolicyMismatch, CodeCOSESignatureInvalid, CodeResponseNotChecked:
		return true
	}
	return false
}

// checkReport requires a report to be consistent with itself.
func checkReport(t *testing.T, r *Report) {
	t.Helper()
	if r.Entries < 1 {
		t.Fatalf("report with %d entries", r.Entries)
	}
	for _, f := range append(r.Findings, r.Notices...) {
		if !knownCode(f.Code) || f.Message == "" || f.EntryIndex < -1 || f.EntryIndex >= r.Entries || (f.EntryIndex == -1 && f.Where == "") {
			t.Fatalf("bad finding %+v in a report of %d entries", f, r.Entries)
		}
	}
}

// FuzzVerifyBundle feeds arbitrary bytes to the bundle reader, with the
// corpus's trust: it must never panic, refuse input only with an
// *InputError, and otherwise return a consistent report.
func FuzzVerifyBundle(f *testing.F) {
	for _, name := range []string{"valid.json", "valid_hmac.json", "valid_steps.json", "not_anchored.json", "policy_unresolved.json"} {
		b := readTestFile(f, "testdata", "bundles", name)
		f.Add(b)
	}
	f.Add([]byte(`{"format":"acsledger-evidence-bundle","version":1,"session_id":"s","entries":[{"entry_id":"a","step_id":"b","step_type":"steps/x","previous_hash":null}]}`))
	f.Add([]byte(`{"format":"acsledger-evidence-bundle","version":1,"session_id":"s","anchors":[{"position":0,"leaf_index":0,"tree_size":1,"proof":[]}],"entries":[]}`))
	f.Add([]byte(`[]`))
	trust := readTrust(f, "")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := VerifyBundle(bytes.NewReader(data), trust)
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) || ie.File != "bundle" || ie.Offset < 0 || ie.Offset > int64(len(data)) {
				t.Fatalf("error is not a bundle *InputError within the input: %v", err)
			}
			return
		}
		checkReport(t, r)
	})
}

// FuzzVerifyChainHeads feeds arbitrary bytes as the response file checked
// against the valid chain: it must never panic, an input error must name
// the responses and a line that exists, and a report must be consistent.
func FuzzVerifyChainHeads(f *testing.F) {
	entries := readTestFile(f, "testdata", "corpus", "valid.jsonl")
	for _, name := range []string{"valid.responses.jsonl", "forged.responses.jsonl", "missing.responses.jsonl"} {
		b := readTestFile(f, "testdata", "corpus", name)
		f.Add(b)
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"request_id":"req-0001","chain_hash":"` + strings.Repeat("0", 64) + `"}}`))
	f.Add([]byte("\n\n{}\n"))
	keys := new(sig.KeySet)
	k, err := sig.ParseHMACKeyFlag("guardian-ikm-1=" + "6163736c65646765722074616d70657220636f7270757320494b4d2c20333242")
	if err != nil {
		f.Fatal(err)
	}
	if err := keys.Add(k.Public()); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := VerifyChainHeads(bytes.NewReader(entries), bytes.NewReader(data), keys, "sess-7f3c9a52-1e4b-4d8a-9c61-0b2e5d7a8f14")
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) || ie.File != "responses" {
				t.Fatalf("error is not a responses *InputError: %v", err)
			}
			if lines := bytes.Count(data, []byte("\n")) + 1; ie.Line < 1 || ie.Line > lines {
				t.Fatalf("error names line %d of input with %d lines: %v", ie.Line, lines, err)
			}
			return
		}
		checkReport(t, r)
		if r.Entries != 10 {
			t.Fatalf("Entries = %d, want 10", r.Entries)
		}
	})
}
