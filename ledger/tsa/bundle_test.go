package tsa_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/internal/tsatest"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/verify"
)

// TestBundleTimestamps: a bundle of a session carries the time-stamp of
// its checkpoint once the stamper stored it; verify checks it against the
// TSA's CA, reports timestamp_missing before it exists when one is
// required, and timestamp_invalid for a tampered or misplaced one.
func TestBundleTimestamps(t *testing.T) {
	ctx := context.Background()
	f := evidencetest.New(t, "sqlite")
	a, roots := startTSA(t)
	build := func() []byte {
		var b bytes.Buffer
		opts := f.Options()
		opts.TSACerts = []string{string(a.CACert)}
		if _, err := evidence.Build(ctx, f.Store, f.Log, f.ECDSASession, &b, opts); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	check := func(bundle []byte, trust *verify.Trust) *verify.Report {
		t.Helper()
		r, err := verify.VerifyBundle(bytes.NewReader(bundle), trust)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	trust := f.Trust(t)
	trust.TSARoots, trust.RequireTimestamp = roots, true

	unstamped := build()
	if r := check(unstamped, trust); !hasCode(r.Findings, verify.CodeTimestampMissing) || len(r.Findings) != 1 {
		t.Fatalf("unstamped bundle with a time-stamp required: %+v", r.Findings)
	}

	stampPending(t, f, a, roots)
	stamped := build()
	r := check(stamped, trust)
	if !r.Verified() || len(r.Timestamps) != 1 || r.Timestamps[0].TreeSize != r.Checkpoint.Size {
		t.Fatalf("stamped bundle: findings %+v, timestamps %+v", r.Findings, r.Timestamps)
	}
	// Without the auditor's TSA certificate the bundle's is used, and said.
	noTSA := f.Trust(t)
	if r := check(stamped, noTSA); !r.Verified() || !hasCode(r.Notices, verify.CodeKeysFromBundle) {
		t.Fatalf("bundle's TSA certificate: findings %+v notices %+v", r.Findings, r.Notices)
	}

	// Tamper with the response inside the bundle.
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(stamped, &doc); err != nil {
		t.Fatal(err)
	}
	var ts []verify.Timestamp
	json.Unmarshal(doc["timestamps"], &ts)
	ts[0].Response[len(ts[0].Response)-40] ^= 0x01
	bad, _ := json.Marshal(ts)
	tampered := bytes.Replace(stamped, doc["timestamps"], bad, 1)
	if r := check(tampered, trust); !hasCode(r.Findings, verify.CodeTimestampInvalid) || !hasCode(r.Findings, verify.CodeTimestampMissing) {
		t.Fatalf("tampered time-stamp: %+v", r.Findings)
	}
	// Another authority's CA does not vouch for it.
	other := f.Trust(t)
	other.TSARoots, _ = verify.ParseTSACerts(tsatest.Start(t).CACert)
	if r := check(stamped, other); !hasCode(r.Findings, verify.CodeTimestampInvalid) {
		t.Fatalf("time-stamp checked against another CA: %+v", r.Findings)
	}
	if !bytes.Contains(stamped, []byte(`"tsa_certs":["-----BEGIN CERTIFICATE-----`)) {
		t.Fatal("bundle does not carry the TSA certificate")
	}
}

func hasCode(fs []verify.Finding, code string) bool {
	return slices.ContainsFunc(fs, func(f verify.Finding) bool { return f.Code == code })
}
