package policy

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/ledger"
)

func baselineRecord(t testing.TB) ledger.PolicyBundle {
	rec := newMemRecorder()
	if _, err := New(context.Background(), Baseline(), rec, func() time.Time { return time.Unix(0, 0) }); err != nil {
		t.Fatal(err)
	}
	r, ok := rec.recorded(BaselineID, BaselineVersion)
	if !ok {
		t.Fatal("baseline not recorded")
	}
	return r
}

func TestBundleFromRecord(t *testing.T) {
	r := baselineRecord(t)
	b, err := BundleFromRecord(r)
	must(t, err)
	d, err := b.Digest()
	must(t, err)
	if d != r.Digest || b.ID != BaselineID || b.Version != BaselineVersion {
		t.Fatalf("BundleFromRecord gave %s with digest %s, recorded %s", b.name(), d, r.Digest)
	}

	for name, tc := range map[string]struct {
		mangle func(*ledger.PolicyBundle)
		says   string
	}{
		"digest of other content": {func(r *ledger.PolicyBundle) { r.Digest = strings.Repeat("0", 64) }, "not the recorded digest"},
		"other version":           {func(r *ledger.PolicyBundle) { r.Version = "9.9.9" }, "content names acsledger-baseline@1.1.0"},
		"not canonical": {func(r *ledger.PolicyBundle) {
			r.Content = append([]byte(" "), r.Content...)
			r.Digest = digestOf(r.Content)
		}, "not in canonical form"},
	} {
		t.Run(name, func(t *testing.T) {
			m := r
			tc.mangle(&m)
			if _, err := BundleFromRecord(m); err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("BundleFromRecord: %v, want an error saying %q", err, tc.says)
			}
		})
	}
}

// TestBundleRecordMangling changes every byte of a recorded bundle in turn,
// with the digest recomputed as an insider rewriting the row would: each
// change is refused, or yields a bundle whose digest no longer matches what
// decisions were made under.
func TestBundleRecordMangling(t *testing.T) {
	r := baselineRecord(t)
	// Re-parsing is ~2 ms a time, so the rewritten-digest half samples
	// every 17th byte; the digest check covers every byte.
	step := 17
	if testing.Short() {
		step = 257
	}
	for i := range r.Content {
		m := r
		m.Content = append([]byte(nil), r.Content...)
		m.Content[i] ^= 0x01
		if _, err := BundleFromRecord(m); err == nil {
			t.Fatalf("byte %d flipped with the recorded digest: accepted", i)
		}
		if i%step != 0 {
			continue
		}
		m.Digest = digestOf(m.Content)
		b, err := BundleFromRecord(m)
		if err != nil {
			continue
		}
		if d, _ := b.Digest(); d == r.Digest {
			t.Fatalf("byte %d flipped: a different bundle kept the original digest", i)
		}
	}
}

func FuzzParseBundle(f *testing.F) {
	content, err := Baseline().Content()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(content)
	f.Add([]byte(`{"id":"a","version":"1","modules":{"a.rego":"package acs"}}`))
	f.Add([]byte(`{"data":{"x":[1,2.5e3,"\u00e9"]},"id":"a","version":"1","modules":{"a/b.rego":"package acs"}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		b, err := ParseBundle(in)
		if err != nil {
			return
		}
		c, err := b.Content()
		if err != nil {
			t.Fatalf("parsed bundle has no content: %v", err)
		}
		b2, err := ParseBundle(c)
		if err != nil {
			t.Fatalf("canonical content does not parse: %v\n%s", err, c)
		}
		c2, err := b2.Content()
		if err != nil || string(c2) != string(c) {
			t.Fatalf("content not stable across a round trip:\n%s\n%s", c, c2)
		}
	})
}

// TestBaselineDigestPinned keeps the shipped baseline's digest in
// testdata/baseline.sha256. Ledgers that recorded a version refuse other
// content under it, so changing a baseline file without a new
// BaselineVersion would break every Guardian upgraded onto a ledger that
// knows the old one.
func TestBaselineDigestPinned(t *testing.T) {
	raw, err := os.ReadFile("testdata/baseline.sha256")
	must(t, err)
	var id, version, digest string
	if _, err := fmt.Sscan(string(raw), &id, &version, &digest); err != nil {
		t.Fatalf("testdata/baseline.sha256: %v", err)
	}
	got, err := Baseline().Digest()
	must(t, err)
	switch {
	case id != BaselineID:
		t.Fatalf("testdata/baseline.sha256 pins %s, the baseline is %s", id, BaselineID)
	case version == BaselineVersion && digest != got:
		t.Fatalf("the baseline's content changed (digest %s) but its version is still %s: bump BaselineVersion and update testdata/baseline.sha256", got, version)
	case version != BaselineVersion:
		t.Fatalf("BaselineVersion is %s: update testdata/baseline.sha256 to %q", BaselineVersion, BaselineID+" "+BaselineVersion+" "+got)
	}
}
