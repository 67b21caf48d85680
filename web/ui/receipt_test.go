package ui_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/web"
)

// TestJourneyReceipt checks receipts on the auditor's log page in
// Chromium, as it checks bundles: a receipt as downloaded verifies in the
// browser and the server issues the same; one whose entry was edited is
// refused with acsverify's code; one moved to another leaf index is
// refused too; and after the log grew, the browser shows the latest
// checkpoint extends the receipt's.
func TestJourneyReceipt(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	base, b := journey(t, f, web.RoleAuditor)
	run(t, b, "open the log", chromedp.Navigate(base+"/ui/log"))
	wait(t, b, "the checkpoint", `document.getElementById("checkpoint").textContent.startsWith(`+jsString(evidencetest.Origin)+`)`)

	check := func(what, input string) (browser []string, steps string, serverClass string) {
		t.Helper()
		run(t, b, what, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.getElementById("input").value = %s;
			document.getElementById("earlier").value = "";
			document.getElementById("browser-verdict").className = "verdict";
			document.getElementById("server-verdict").textContent = "";`, jsString(input))),
			chromedp.Click("#check"))
		wait(t, b, what+": the browser's verdict", `/ (ok|bad|error)$/.test(document.getElementById("browser-verdict").className)`)
		wait(t, b, what+": the server's answer", `document.getElementById("server-verdict").textContent !== "" && !document.getElementById("server-verdict").textContent.startsWith("Asking")`)
		return strings.Fields(eval[string](t, b, `document.getElementById("browser-verdict").dataset.codes || ""`)),
			eval[string](t, b, `document.getElementById("browser-steps").textContent`),
			eval[string](t, b, `document.getElementById("server-verdict").className`)
	}
	url := "/api/v1/sessions/" + f.ECDSASession + "/entries/1/receipt"
	receipt := evalAwait[string](t, b, `fetch(`+jsString(url)+`).then(r => r.text())`)
	if !strings.HasPrefix(receipt, "c2sp.org/tlog-proof@v1\nextra ") {
		t.Fatalf("receipt: %q", receipt)
	}
	br, steps, server := check("the receipt as downloaded", receipt)
	if len(br) != 0 || !strings.HasSuffix(server, " ok") || !strings.Contains(steps, "Inclusion: leaf") || !strings.Contains(steps, "Entry: its content") || !strings.Contains(steps, "Response: it answers this step") {
		t.Fatalf("downloaded receipt: browser %v, server %s\n%s", br, server, steps)
	}
	screenshot(t, b, "log-receipt")

	// The entry's reasoning edited, its entry_hash kept.
	tampered := evalAwait[string](t, b, `(async () => {
		const lines = `+jsString(receipt)+`.split("\n");
		const x = JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(lines[1].slice(6)), c => c.charCodeAt(0))));
		x.entry.decision.reasoning = "nothing to see here";
		lines[1] = "extra " + btoa(String.fromCharCode(...new TextEncoder().encode(ACSVerify.jcs(x))));
		return lines.join("\n");
	})()`)
	br, _, server = check("the receipt edited", tampered)
	if !slices.Contains(br, "entry_hash_mismatch") || !strings.HasSuffix(server, " bad") {
		t.Fatalf("edited receipt: browser %v, server %s", br, server)
	}

	// Moved to the leaf index of another entry.
	other := evalAwait[string](t, b, `fetch("/api/v1/sessions/`+f.ECDSASession+`/entries/0/receipt").then(r => r.text())`)
	moved := strings.Replace(receipt, strings.Split(receipt, "\n")[2], strings.Split(other, "\n")[2], 1)
	br, _, _ = check("the receipt moved", moved)
	if !slices.Contains(br, "inclusion_proof_invalid") {
		t.Fatalf("moved receipt: browser %v", br)
	}

	// The log grows: the old receipt still verifies, and the browser
	// shows the latest checkpoint extends the receipt's.
	f.Call(t, f.ECDSASession, "steps/toolCallRequest", map[string]any{"tool": map[string]any{"name": "read_file"}, "arguments": map[string]any{}})
	f.Integrate(t)
	run(t, b, "reload the log", chromedp.Navigate(base+"/ui/log"))
	wait(t, b, "the checkpoint", `document.getElementById("checkpoint").textContent.startsWith(`+jsString(evidencetest.Origin)+`)`)
	br, steps, server = check("the receipt after the log grew", receipt)
	if len(br) != 0 || !strings.HasSuffix(server, " ok") || !strings.Contains(steps, "Later: the log's latest checkpoint") {
		t.Fatalf("receipt after growth: browser %v, server %s\n%s", br, server, steps)
	}
}
