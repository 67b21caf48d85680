//go:build ignore

// gen_util holds what the corpus generators gen_corpus.go and
// gen_bundles.go share: the files they write and the manifest types. It is
// run with each of them: go run gen_corpus.go gen_util.go.
package main

import (
	"encoding/json"
	"log"
	"os"
	"path/filepath"
)

// finding is a finding or notice a manifest expects: its code and the
// 0-based entry_index (-1 for none).
type finding struct {
	Code       string `json:"code"`
	EntryIndex int    `json:"entry_index"`
}

// entryHead holds the members a ContextEntry starts with (ACS §8.1), in
// the order a Guardian writes them; each generator's entry embeds it.
type entryHead struct {
	EntryID     string `json:"entry_id"`
	StepID      string `json:"step_id"`
	StepType    string `json:"step_type"`
	Timestamp   string `json:"timestamp"`
	RequestHash string `json:"request_hash"`
}

type policyRef struct {
	PolicyID      string `json:"policy_id"`
	PolicyVersion string `json:"policy_version"`
	RuleID        string `json:"rule_id"`
}

// orNone returns fs, or an empty list for nil, so a manifest lists [] and
// never null.
func orNone(fs []finding) []finding {
	if fs == nil {
		return []finding{}
	}
	return fs
}

// writeFile writes b to dir/file.
func writeFile(dir, file string, b []byte) {
	if err := os.WriteFile(filepath.Join(dir, file), b, 0o644); err != nil {
		log.Fatal(err)
	}
}

// writeJSON writes v to dir/file, indented with indent, and a final newline.
func writeJSON(dir, file string, v any, indent string) {
	out, err := json.MarshalIndent(v, "", indent)
	if err != nil {
		log.Fatal(err)
	}
	writeFile(dir, file, append(out, '\n'))
}
