package evidence_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/ledger"
)

// TestErasedParamsStillVerify erases the params of every step of a
// session: its evidence bundle is the same bytes as before and verifies
// with no findings, since the chain commits to params only through
// request_hash (docs/storage.md, "Request params").
func TestErasedParamsStillVerify(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			f := evidencetest.New(t, kind)
			before, _ := build(t, f, f.Log, f.HMACSession, f.Options())
			erased := 0
			for e, err := range ledger.AllEntries(ctx, f.Store, f.HMACSession) {
				if err != nil {
					t.Fatal(err)
				}
				_, err := f.Store.EraseParams(ctx, f.HMACSession, e.Position, "test erasure", "evidence_test")
				switch {
				case err == nil:
					erased++
				case !errors.Is(err, ledger.ErrNotFound):
					t.Fatalf("erase position %d: %v", e.Position, err)
				}
			}
			if erased < 3 {
				t.Fatalf("erased the params of %d steps; the fixture's session should have at least 3", erased)
			}
			after, sum := build(t, f, f.Log, f.HMACSession, f.Options())
			if !bytes.Equal(before, after) {
				t.Errorf("the bundle changed with the erasure:\n%s\n%s", before, after)
			}
			rep := verifyBytes(t, after, f.Trust(t))
			if !rep.Verified() || len(rep.Findings) != 0 || len(rep.Notices) != 0 || rep.Entries != int(sum.Entries) || !sum.Anchored {
				t.Fatalf("bundle after the erasure: verified=%v findings %v notices %v, %+v", rep.Verified(), rep.Findings, rep.Notices, sum)
			}
		})
	}
}
