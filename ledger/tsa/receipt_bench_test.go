package tsa_test

import (
	"context"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/verify"
)

// BenchmarkReceiptTimestamp measures what trusted time adds to a receipt
// (SQLite, a real openssl TSA): issuing a stamped receipt (the stored
// response is read, checked and its token taken out) beside issuing the
// same entry's receipt from a log with no stamps (same run, same data);
// verifying it with --tsa-cert (CMS signature, chain) beside verifying
// the same receipt without its token.
func BenchmarkReceiptTimestamp(b *testing.B) {
	ctx := context.Background()
	f := evidencetest.New(b, "sqlite")
	a, roots := startTSA(b)
	unstamped, err := evidence.Receipt(ctx, f.Store, f.Log, f.ECDSASession, 1)
	if err != nil {
		b.Fatal(err)
	}
	stampPending(b, f, a, roots)
	stamped, err := evidence.Receipt(ctx, f.Store, f.Log, f.ECDSASession, 1)
	if err != nil {
		b.Fatal(err)
	}
	ks, err := sig.NewKeySet(f.ECDSA.Public())
	if err != nil {
		b.Fatal(err)
	}
	trust := &verify.ReceiptTrust{ResponseKeys: ks, Checkpoint: verify.CheckpointPolicy{LogKeys: []string{f.LogVerifier}}, TSARoots: roots}
	b.Run("issue", func(b *testing.B) {
		var withTS, without time.Duration
		for b.Loop() {
			t0 := time.Now()
			if _, err := evidence.Receipt(ctx, f.Store, f.Log, f.ECDSASession, 1); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if _, err := evidence.Receipt(ctx, f.Store, noStamps{f.Log}, f.ECDSASession, 1); err != nil {
				b.Fatal(err)
			}
			withTS += t1.Sub(t0)
			without += time.Since(t1)
		}
		b.ReportMetric(float64(withTS.Microseconds())/float64(b.N), "us/stamped-receipt")
		b.ReportMetric(float64(without.Microseconds())/float64(b.N), "us/baseline-receipt")
	})
	b.Run("verify", func(b *testing.B) {
		var withTS, without time.Duration
		for b.Loop() {
			t0 := time.Now()
			rep, err := verify.VerifyReceipt(stamped, trust, nil)
			if err != nil || !rep.Verified || len(rep.Timestamps) != 1 {
				b.Fatalf("%v %+v", err, rep)
			}
			t1 := time.Now()
			rep, err = verify.VerifyReceipt(unstamped, trust, nil)
			if err != nil || !rep.Verified {
				b.Fatalf("%v %+v", err, rep)
			}
			withTS += t1.Sub(t0)
			without += time.Since(t1)
		}
		b.ReportMetric(float64(withTS.Microseconds())/float64(b.N), "us/stamped-verify")
		b.ReportMetric(float64(without.Microseconds())/float64(b.N), "us/baseline-verify")
	})
}

// noStamps is the log as one without a time-stamping authority sees it.
type noStamps struct{ evidence.ReceiptLog }

func (noStamps) Timestamp(context.Context, uint64) ([]byte, error) {
	return nil, tlog.ErrNotFound
}
