package api_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/verify"
	"github.com/acsledger/acsledger/web/internal/webtest"
)

// TestCOSEReceiptRoute: ?format=cose gives the COSE form of the receipt
// (docs/receipts.md), which verifies under the log's key and proves the
// same leaf in the same tree as the tlog-proof form; the default and
// ?format=tlog-proof give the tlog-proof form, byte for byte.
func TestCOSEReceiptRoute(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	base := evidenceServer(t, f, nil)
	path := base + "/sessions/" + f.ECDSASession + "/entries/1/receipt"

	code, _, plain := webtest.Do(t, "GET", path, nil)
	if code != 200 {
		t.Fatalf("receipt: %d %s", code, plain)
	}
	code, _, named := webtest.Do(t, "GET", path+"?format=tlog-proof", nil)
	if code != 200 || !bytes.Equal(plain, named) {
		t.Fatalf("?format=tlog-proof: %d, differs from the default: %v", code, !bytes.Equal(plain, named))
	}
	trp, err := verify.VerifyReceipt(plain, &verify.ReceiptTrust{Checkpoint: verify.CheckpointPolicy{LogKeys: []string{f.LogVerifier}}}, nil)
	if err != nil {
		t.Fatal(err)
	}

	code, h, doc := webtest.Do(t, "GET", path+"?format=cose", nil)
	if code != 200 || h.Get("Content-Type") != `application/cose; cose-type="cose-sign1"` || !strings.Contains(h.Get("Content-Disposition"), "receipt-"+f.ECDSASession+"-1.cose") {
		t.Fatalf("?format=cose: %d %v\n%q", code, h, doc)
	}
	if !verify.IsCOSE(doc) {
		t.Fatalf("?format=cose is not a tagged COSE_Sign1: %q", doc[:min(len(doc), 16)])
	}
	rep, err := verify.VerifyCOSEReceipt(doc, &verify.ReceiptTrust{Checkpoint: verify.CheckpointPolicy{LogKeys: []string{f.LogVerifier}}})
	if err != nil || !rep.Verified {
		t.Fatalf("COSE receipt: %v %+v", err, rep)
	}
	if rep.SessionID != f.ECDSASession || rep.Position != 1 || rep.EntryHash != trp.EntryHash || rep.LeafIndex != trp.LeafIndex ||
		rep.TreeSize != trp.TreeSize || rep.Origin != trp.Origin || rep.StepID != trp.StepID {
		t.Errorf("the COSE receipt proves %+v,\nthe tlog-proof %+v", rep, trp)
	}
	code, _, again := webtest.Do(t, "GET", path+"?format=cose", nil)
	if code != 200 || !bytes.Equal(again, doc) {
		t.Errorf("a second ?format=cose gave other bytes (%d)", code)
	}

	// Not anchored yet: 409 in either form; a format nobody knows: 400.
	f.Call(t, f.ECDSASession, "steps/toolCallRequest", map[string]any{"tool": map[string]any{"name": "list_dir"}, "arguments": map[string]any{}})
	code, h, b := webtest.Do(t, "GET", base+"/sessions/"+f.ECDSASession+"/entries/2/receipt?format=cose", nil)
	if code != 409 || h.Get("Retry-After") == "" {
		t.Fatalf("unanchored ?format=cose: %d %v %s", code, h, b)
	}
	code, _, b = webtest.Do(t, "GET", path+"?format=scitt", nil)
	if code != 400 || !strings.Contains(webtest.ErrorText(t, b), `format "scitt"`) {
		t.Errorf("?format=scitt: %d %s", code, b)
	}
}
