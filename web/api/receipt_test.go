package api_test

import (
	"strings"
	"testing"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/verify"
	"github.com/acsledger/acsledger/web/internal/webtest"
)

func TestReceiptRoute(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	base := evidenceServer(t, f, nil)
	path := base + "/sessions/" + f.ECDSASession + "/entries/1/receipt"
	code, h, b := webtest.Do(t, "GET", path, nil)
	if code != 200 || h.Get("Content-Type") != "text/plain; charset=utf-8" || !strings.Contains(h.Get("Content-Disposition"), "receipt-"+f.ECDSASession+"-1.tlog-proof") {
		t.Fatalf("receipt: %d %v\n%s", code, h, b)
	}
	ks, _ := sig.NewKeySet(f.ECDSA.Public())
	rep, err := verify.VerifyReceipt(b, &verify.ReceiptTrust{ResponseKeys: ks, Checkpoint: verify.CheckpointPolicy{LogKeys: []string{f.LogVerifier}}}, nil)
	if err != nil || !rep.Verified || rep.SessionID != f.ECDSASession || rep.Position != 1 {
		t.Fatalf("downloaded receipt: %v %+v", err, rep)
	}

	// A step the log has not integrated yet: 409, and when to retry.
	f.Call(t, f.ECDSASession, "steps/toolCallRequest", map[string]any{"tool": map[string]any{"name": "list_dir"}, "arguments": map[string]any{}})
	code, h, b = webtest.Do(t, "GET", base+"/sessions/"+f.ECDSASession+"/entries/2/receipt", nil)
	if code != 409 || h.Get("Retry-After") != "1" || !strings.Contains(webtest.ErrorText(t, b), "retry in 1 s") {
		t.Fatalf("unanchored: %d %v %s", code, h, b)
	}
	f.Integrate(t)
	if code, _, b = webtest.Do(t, "GET", base+"/sessions/"+f.ECDSASession+"/entries/2/receipt", nil); code != 200 {
		t.Fatalf("after integration: %d %s", code, b)
	}

	for _, c := range []struct {
		path string
		code int
		msg  string
	}{
		{"/sessions/" + f.ECDSASession + "/entries/3/receipt", 404, "no entry at position 3"},
		{"/sessions/no-such-session/entries/0/receipt", 404, "no-such-session"},
		{"/sessions/" + f.ECDSASession + "/entries/-1/receipt", 400, "position"},
		{"/sessions/" + f.ECDSASession + "/entries/x/receipt", 400, "position"},
	} {
		code, _, b := webtest.Do(t, "GET", base+c.path, nil)
		if code != c.code || !strings.Contains(webtest.ErrorText(t, b), c.msg) {
			t.Errorf("GET %s: %d %s", c.path, code, b)
		}
	}
}
