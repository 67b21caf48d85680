package evidence_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/verify"
)

// BenchmarkReceipt measures a receipt end to end on a store written by the
// real Guardian (ECDSA-signed responses, a witness cosignature) on both
// stores: "issue" is evidence.Receipt (the entry, its response, its leaf,
// the first checkpoint that covered it and the proof) beside its same-run
// baseline, the existing entry proof against the latest checkpoint
// (Log.EntryProof, GET /api/v1/proofs/entry); "verify" is
// verify.VerifyReceipt with the response key and the witness trusted,
// beside the baseline of what any tlog-proof verifier does (the checkpoint's
// signatures and the inclusion proof alone). The target is a p99 of
// at most 10 ms and the verify's under 1 ms per receipt; BenchmarkReceiptAnchor
// in ledger/tlog has the log's part at 10,000,000 leaves.
func BenchmarkReceipt(b *testing.B) {
	for _, kind := range kinds {
		b.Run(kind, func(b *testing.B) {
			f := evidencetest.New(b, kind)
			ctx := context.Background()
			_, cp := f.Checkpoint(b)
			wkey := cosign(b, f, "witness1.test", 7, cp.Size)
			sess, err := f.Store.Session(ctx, f.ECDSASession)
			if err != nil {
				b.Fatal(err)
			}
			b.Run("issue", func(b *testing.B) {
				rec := make([]time.Duration, 0, b.N)
				base := make([]time.Duration, 0, b.N)
				i := int64(0)
				for b.Loop() {
					pos := i % sess.Length
					i++
					t0 := time.Now()
					if _, err := evidence.Receipt(ctx, f.Store, f.Log, f.ECDSASession, pos); err != nil {
						b.Fatal(err)
					}
					t1 := time.Now()
					if _, _, err := f.Log.EntryProof(ctx, f.ECDSASession, pos); err != nil {
						b.Fatal(err)
					}
					base = append(base, time.Since(t1))
					rec = append(rec, t1.Sub(t0))
				}
				reportLatency(b, "receipt", rec)
				reportLatency(b, "entry-proof", base)
			})
			doc, err := evidence.Receipt(ctx, f.Store, f.Log, f.ECDSASession, 1)
			if err != nil {
				b.Fatal(err)
			}
			trust := receiptTrust(b, f, wkey)
			b.Run("verify", func(b *testing.B) {
				for b.Loop() {
					rep, err := verify.VerifyReceipt(doc, trust, nil)
					if err != nil || !rep.Verified {
						b.Fatalf("%v %+v", err, rep)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/receipt")
			})
			b.Run("verify-baseline-tlog-proof", func(b *testing.B) {
				r, err := verify.ParseReceipt(doc)
				if err != nil {
					b.Fatal(err)
				}
				leafData, _ := verify.LeafHash(f.ECDSASession, 1, mustEntryHash(b, f, 1))
				for b.Loop() {
					r, err := verify.ParseReceipt(doc)
					if err != nil {
						b.Fatal(err)
					}
					c, fs, err := verify.VerifyCheckpoint(r.Checkpoint, &trust.Checkpoint, "checkpoint")
					if err != nil || len(fs) != 0 {
						b.Fatal(err, fs)
					}
					if err := verify.VerifyInclusion(leafData, r.Index, c.Size, r.Proof, c.Root); err != nil {
						b.Fatal(err)
					}
				}
				_ = r
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/receipt")
			})
		})
	}
}

func reportLatency(b *testing.B, name string, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, name+"-p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, name+"-p99-ms")
}

func mustEntryHash(b *testing.B, f *evidencetest.Fixture, pos int64) [32]byte {
	es, err := f.Store.Entries(context.Background(), f.ECDSASession, pos, 1)
	if err != nil || len(es) == 0 {
		b.Fatal(err)
	}
	return es[0].EntryHash
}
