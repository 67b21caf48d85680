package evidence_test

import (
	"context"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/verify"
)

// BenchmarkCOSEReceipt measures the COSE form of a receipt (RFC 9942 in a
// SCITT transparent statement) beside its same-run baseline, the
// tlog-proof form of the same entries: "issue" alternates
// evidence.COSEReceipt and evidence.Receipt on the same positions (the
// COSE form adds two Ed25519 signatures and CBOR encoding, and reads no
// response or time-stamp); "verify" alternates verify.VerifyCOSEReceipt
// and verify.VerifyReceipt with the log key only (one Ed25519 checkpoint
// signature, the entry hash, the inclusion proof, no response key).
func BenchmarkCOSEReceipt(b *testing.B) {
	for _, kind := range kinds {
		b.Run(kind, func(b *testing.B) {
			f := evidencetest.New(b, kind)
			ctx := context.Background()
			sess, err := f.Store.Session(ctx, f.ECDSASession)
			if err != nil {
				b.Fatal(err)
			}
			b.Run("issue", func(b *testing.B) {
				cose := make([]time.Duration, 0, b.N)
				tlp := make([]time.Duration, 0, b.N)
				i := int64(0)
				for b.Loop() {
					pos := i % sess.Length
					i++
					t0 := time.Now()
					if _, err := evidence.COSEReceipt(ctx, f.Store, f.Log, f.ECDSASession, pos); err != nil {
						b.Fatal(err)
					}
					t1 := time.Now()
					if _, err := evidence.Receipt(ctx, f.Store, f.Log, f.ECDSASession, pos); err != nil {
						b.Fatal(err)
					}
					tlp = append(tlp, time.Since(t1))
					cose = append(cose, t1.Sub(t0))
				}
				reportLatency(b, "cose", cose)
				reportLatency(b, "tlog-proof", tlp)
			})
			doc, err := evidence.COSEReceipt(ctx, f.Store, f.Log, f.ECDSASession, 1)
			if err != nil {
				b.Fatal(err)
			}
			plain, err := evidence.Receipt(ctx, f.Store, f.Log, f.ECDSASession, 1)
			if err != nil {
				b.Fatal(err)
			}
			trust := &verify.ReceiptTrust{Checkpoint: verify.CheckpointPolicy{LogKeys: []string{f.LogVerifier}}}
			b.Run("verify", func(b *testing.B) {
				var cose, tlp time.Duration
				for b.Loop() {
					t0 := time.Now()
					rep, err := verify.VerifyCOSEReceipt(doc, trust)
					if err != nil || !rep.Verified {
						b.Fatalf("%v %+v", err, rep)
					}
					t1 := time.Now()
					rep, err = verify.VerifyReceipt(plain, trust, nil)
					if err != nil || !rep.Verified {
						b.Fatalf("%v %+v", err, rep)
					}
					tlp += time.Since(t1)
					cose += t1.Sub(t0)
				}
				b.ReportMetric(float64(cose.Microseconds())/float64(b.N), "us/cose")
				b.ReportMetric(float64(tlp.Microseconds())/float64(b.N), "us/tlog-proof")
				b.ReportMetric(float64(cose)/float64(tlp), "cose/tlog-proof")
			})
		})
	}
}
