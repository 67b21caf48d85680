package tsa_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/internal/tsatest"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/verify"
)

// TestReceiptTimestamp: a receipt made before the authority stamped its
// checkpoint carries no token (timestamp_missing when one is required);
// once the stamper stored the time-stamp, the receipt carries its token,
// which verifies against the TSA's CA with the stamped time, which
// `openssl ts -verify` accepts too, and which is timestamp_invalid when
// mangled, checked against another CA or not checkable.
func TestReceiptTimestamp(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) { testReceiptTimestamp(t, kind) })
	}
}

func testReceiptTimestamp(t *testing.T, kind string) {
	ctx := context.Background()
	f := evidencetest.New(t, kind)
	a, roots := startTSA(t)
	ks, err := sig.NewKeySet(f.HMAC.Public(), f.ECDSA.Public())
	if err != nil {
		t.Fatal(err)
	}
	trust := &verify.ReceiptTrust{ResponseKeys: ks, Checkpoint: verify.CheckpointPolicy{LogKeys: []string{f.LogVerifier}},
		TSARoots: roots, RequireTimestamp: true}
	receipt := func() []byte {
		t.Helper()
		doc, err := evidence.Receipt(ctx, f.Store, f.Log, f.ECDSASession, 1)
		if err != nil {
			t.Fatal(err)
		}
		return doc
	}
	check := func(doc []byte, tr *verify.ReceiptTrust) *verify.ReceiptReport {
		t.Helper()
		rep, err := verify.VerifyReceipt(doc, tr, nil)
		if err != nil {
			t.Fatalf("VerifyReceipt: %v\n%s", err, doc)
		}
		return rep
	}

	unstamped := receipt()
	if rep := check(unstamped, trust); rep.TimestampToken || len(rep.Findings) != 1 || rep.Findings[0].Code != verify.CodeTimestampMissing {
		t.Fatalf("unstamped receipt with a time-stamp required: token %v, findings %+v", rep.TimestampToken, rep.Findings)
	}
	optional := *trust
	optional.RequireTimestamp = false
	if rep := check(unstamped, &optional); !rep.Verified || len(rep.Timestamps) != 0 {
		t.Fatalf("unstamped receipt, time-stamp not required: %+v", rep)
	}

	before := time.Now().Add(-time.Minute)
	s := stampPending(t, f, a, roots)
	stamped := receipt()
	rep := check(stamped, trust)
	if !rep.Verified || !rep.TimestampToken || len(rep.Timestamps) != 1 || rep.Timestamps[0].TreeSize != rep.TreeSize ||
		rep.Timestamps[0].Time.Before(before) || rep.Timestamps[0].Time.After(time.Now().Add(time.Minute)) {
		t.Fatalf("stamped receipt: %+v", rep)
	}
	// The stamp covers the receipt's own checkpoint: the one stored for
	// that size, as the log serves it.
	r, err := verify.ParseReceipt(stamped)
	if err != nil {
		t.Fatal(err)
	}
	x := extra(t, r.Extra)
	stored, err := f.Log.Timestamp(ctx, rep.TreeSize)
	if err != nil {
		t.Fatal(err)
	}
	if tok, _ := verify.TimestampToken(stored, r.Checkpoint); !bytes.Equal(tok, x.TimestampToken) {
		t.Fatal("the receipt's token is not the one of the stored response")
	}
	opensslVerify(t, a, r.Checkpoint, x.TimestampToken)

	// No certificate to check it against: a notice, or with the time-stamp
	// required, timestamp_invalid.
	noCA := optional
	noCA.TSARoots = nil
	if rep := check(stamped, &noCA); !rep.Verified || len(rep.Timestamps) != 0 || len(rep.Notices) != 1 || rep.Notices[0].Code != verify.CodeTimestampNotChecked {
		t.Fatalf("stamped receipt without --tsa-cert: %+v", rep)
	}
	noCA.RequireTimestamp = true
	if rep := check(stamped, &noCA); !hasCode(rep.Findings, verify.CodeTimestampInvalid) {
		t.Fatalf("stamped receipt without --tsa-cert, time-stamp required: %+v", rep.Findings)
	}
	// Another authority's CA does not vouch for it.
	other := *trust
	other.TSARoots, _ = verify.ParseTSACerts(tsatest.Start(t).CACert)
	if rep := check(stamped, &other); !hasCode(rep.Findings, verify.CodeTimestampInvalid) {
		t.Fatalf("time-stamp checked against another CA: %+v", rep.Findings)
	}
	// A token changed anywhere (one byte in each of a spread of places,
	// the receipt rewritten in its one canonical form) is invalid.
	for _, i := range []int{0, 5, len(x.TimestampToken) / 3, len(x.TimestampToken) / 2, len(x.TimestampToken) - 40, len(x.TimestampToken) - 1} {
		m := x
		m.TimestampToken = bytes.Clone(x.TimestampToken)
		m.TimestampToken[i] ^= 0x01
		doc := withExtra(t, r, m)
		rep, err := verify.VerifyReceipt(doc, trust, nil)
		if err != nil {
			t.Fatalf("byte %d: %v", i, err)
		}
		if !hasCode(rep.Findings, verify.CodeTimestampInvalid) || rep.Verified || len(rep.Timestamps) != 0 {
			t.Fatalf("token with byte %d changed: %+v", i, rep)
		}
	}
	// Every byte of the token matters (CMS leaves some parts unsigned;
	// verify pins them), and so does its spelling: base64 with non-zero
	// padding bits or an escaped line break decodes to the same token,
	// and is refused as input.
	for i := range x.TimestampToken {
		if kind != "sqlite" {
			break // the same check on the same kind of token: once is enough
		}
		for _, bit := range []byte{0x01} {
			m := x
			m.TimestampToken = bytes.Clone(x.TimestampToken)
			m.TimestampToken[i] ^= bit
			rep, err := verify.VerifyReceipt(withExtra(t, r, m), trust, nil)
			if err != nil {
				t.Fatalf("token byte %d: %v", i, err)
			}
			if rep.Verified || len(rep.Timestamps) != 0 || !hasCode(rep.Findings, verify.CodeTimestampInvalid) {
				t.Errorf("token byte %d with bit %#x flipped still verifies", i, bit)
			}
		}
	}
	enc := base64.StdEncoding.EncodeToString(x.TimestampToken)
	spellings := []string{enc[:8] + `\n` + enc[8:]}
	// With padding (the token's length varies with its ECDSA signature),
	// the lowest bit of the last character is a padding bit.
	if last := strings.TrimRight(enc, "="); len(last) < len(enc) {
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
		c := strings.IndexByte(alphabet, last[len(last)-1])
		loose := last[:len(last)-1] + string(alphabet[c^1]) + enc[len(last):]
		if b, err := base64.StdEncoding.DecodeString(loose); err != nil || !bytes.Equal(b, x.TimestampToken) {
			t.Fatalf("the loose spelling %q is not the same token: %v", loose[len(loose)-4:], err)
		}
		spellings = append(spellings, loose)
	}
	for _, spelling := range spellings {
		m := bytes.Replace(r.Extra, []byte(enc), []byte(spelling), 1)
		if _, err := verify.VerifyReceipt(verify.FormatReceipt(m, r.Index, r.Proof, r.Checkpoint), trust, nil); err == nil {
			t.Errorf("token spelled %q...%q accepted", spelling[:12], spelling[len(spelling)-4:])
		}
	}

	// The log grows and its new checkpoint is stamped: the receipt stays
	// as it was, and the new checkpoint's token moved into it does not
	// cover its checkpoint.
	sid := f.NewSession(t, f.ECDSASession)
	f.Call(t, sid, "steps/toolCallRequest", map[string]any{"tool": map[string]any{"name": "list_dir"},
		"arguments": map[string]any{"path": map[string]any{"value": ".", "provenance": map[string]any{"provenance_id": "p-later", "origin": "user_input"}}}})
	f.Integrate(t)
	if n, err := s.StampPending(ctx); err != nil || n == 0 {
		t.Fatalf("stamped %d: %v", n, err)
	}
	if !bytes.Equal(receipt(), stamped) {
		t.Fatal("the receipt changed as the log grew")
	}
	_, head := f.Checkpoint(t)
	if head.Size <= rep.TreeSize {
		t.Fatalf("the log did not grow past %d", rep.TreeSize)
	}
	newer, err := f.Log.Timestamp(ctx, head.Size)
	if err != nil {
		t.Fatal(err)
	}
	moved := x
	newerCP, _ := f.Checkpoint(t)
	if moved.TimestampToken, err = verify.TimestampToken(newer, newerCP); err != nil {
		t.Fatal(err)
	}
	if rep := check(withExtra(t, r, moved), trust); !hasCode(rep.Findings, verify.CodeTimestampInvalid) || len(rep.Timestamps) != 0 {
		t.Fatalf("another checkpoint's token: %+v", rep)
	}
}

func extra(t *testing.T, b []byte) verify.ReceiptExtra {
	t.Helper()
	var x verify.ReceiptExtra
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	return x
}

// withExtra is r with extra data x, in RFC 8785 form.
func withExtra(t *testing.T, r *verify.Receipt, x verify.ReceiptExtra) []byte {
	t.Helper()
	b, err := json.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	return verify.FormatReceipt(canonical(t, b), r.Index, r.Proof, r.Checkpoint)
}

func canonical(t *testing.T, b []byte) []byte {
	t.Helper()
	out, err := acs.Canonicalize(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// opensslVerify checks the token with Debian's openssl, a reader we did
// not write: `openssl ts -verify` over the checkpoint note text.
func opensslVerify(t *testing.T, a *tsatest.TSA, checkpoint, token []byte) {
	t.Helper()
	text, err := verify.CheckpointText(checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tok, data := filepath.Join(dir, "token.der"), filepath.Join(dir, "checkpoint.txt")
	os.WriteFile(tok, token, 0o600)
	os.WriteFile(data, text, 0o600)
	out, err := exec.Command("openssl", "ts", "-verify", "-token_in", "-in", tok, "-data", data, "-CAfile", a.CACertFile).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("Verification: OK")) {
		t.Fatalf("openssl ts -verify: %v\n%s\n(token %s)", err, out, base64.StdEncoding.EncodeToString(token))
	}
}
