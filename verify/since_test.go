package verify_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/verify"
)

// TestVerifyBundleSince compares the corpus's later bundles with
// since_earlier.json (gen_bundles.go, writeSince): each verifies on its own,
// and only valid.json extends the earlier bundle.
func TestVerifyBundleSince(t *testing.T) {
	dir := filepath.Join("testdata", "bundles")
	tb := verify.ReadTestFile(t, dir, "trust.json")
	trust, err := verify.ParseTrust(tb)
	if err != nil {
		t.Fatal(err)
	}
	open := func(t *testing.T, name string) *os.File {
		t.Helper()
		return verify.OpenTestFile(t, dir, name)
	}
	earlier, err := verify.VerifyBundle(open(t, "since_earlier.json"), trust)
	if err != nil || !earlier.Verified() || earlier.Entries != 5 || earlier.Checkpoint == nil || earlier.SessionID == "" {
		t.Fatalf("since_earlier.json: %v %+v", err, earlier)
	}
	for _, tc := range []struct {
		file string
		want []string
	}{
		{"valid.json", nil},
		{"since_truncated.json", []string{verify.CodeTruncated}},
		{"since_rewritten.json", []string{verify.CodeRewritten, verify.CodeLogFork}},
		{"since_unproven.json", []string{verify.CodeLogFork}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			alone, err := verify.VerifyBundle(open(t, tc.file), trust)
			if err != nil || !alone.Verified() {
				t.Fatalf("on its own: %v %+v", err, alone)
			}
			rep, err := verify.VerifyBundleSince(open(t, tc.file), trust, earlier)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range rep.Findings {
				got = append(got, f.Code)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("findings %v, want %v: %+v", got, tc.want, rep.Findings)
			}
		})
	}
	t.Run("another session", func(t *testing.T) {
		_, err := verify.VerifyBundleSince(strings.NewReader(`{"format":"acsledger-evidence-bundle","version":1,"session_id":"x","entries":[]}`), trust, earlier)
		if err == nil || !strings.Contains(err.Error(), "earlier bundle is of session") {
			t.Fatalf("err %v", err)
		}
	})
}
