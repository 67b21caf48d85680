package ui_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/acsledger/acsledger/guardian/policy"
	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/web"
	"github.com/acsledger/acsledger/web/internal/webtest"
)

// TestJourneyWhatIf: an auditor runs a recorded permissive version over
// the history as a what-if, reads the summary, the chart and the changed
// steps, opens a changed step in the decision view with both sides and
// their rules, and from there asks the incident question about it.
func TestJourneyWhatIf(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	webtest.RecordPermissive(t, f.Store)
	base, b := journey(t, f, web.RoleAuditor)
	permissive := `{"policy_id":"` + policy.BaselineID + `","policy_version":"` + webtest.PermissiveVersion + `"}`

	run(t, b, "open what-if", chromedp.Navigate(base+"/ui/whatif"), chromedp.WaitVisible("#whatif-form"))
	wait(t, b, "the recorded versions", `document.querySelectorAll("#recorded option").length === 2`)
	run(t, b, "pick the permissive version", chromedp.Click(`input[name=kind][value=recorded]`),
		chromedp.SetValue("#recorded", permissive), chromedp.Click("#whatif-start"))
	wait(t, b, "the report", `!document.getElementById("whatif-report").hidden`)
	var denied int
	for _, s := range f.Steps {
		if s.Decision != "allow" {
			denied++
		}
	}
	if got := eval[string](t, b, `document.getElementById("changed-count").textContent`); got == "0" || got == "" {
		t.Fatalf("changed count %q", got)
	}
	kinds := eval[string](t, b, `document.getElementById("whatif-kinds").textContent`)
	if !strings.Contains(kinds, "deny->allow") {
		t.Errorf("kinds %q", kinds)
	}
	if n := eval[int](t, b, `document.querySelectorAll("#whatif-chart svg rect.bar").length`); n != 1 {
		t.Errorf("the chart has %d bars, want one day", n)
	}
	rows := eval[int](t, b, `document.querySelectorAll("#whatif-changes tbody tr").length`)
	if rows == 0 || rows > denied {
		t.Errorf("%d changed steps listed, %d steps were not allowed", rows, denied)
	}
	if got := eval[string](t, b, `location.search`); !strings.Contains(got, "run=") {
		t.Errorf("the run is not in the address: %s", got)
	}
	screenshot(t, b, "whatif")

	// A changed step opens the decision view with both sides.
	run(t, b, "open a changed step", chromedp.Click(`#whatif-changes a.whatif-step`))
	settle(t, b, `location.pathname`, "/ui/decisions/")
	wait(t, b, "both sides", `!!document.getElementById("whatif-sides")`)
	rec := eval[string](t, b, `document.getElementById("whatif-recorded").textContent`)
	cand := eval[string](t, b, `document.getElementById("whatif-candidate").textContent`)
	if strings.Contains(rec, "allow") || !strings.Contains(cand, "allow") || !strings.Contains(cand, "permit.all") {
		t.Errorf("recorded %q, candidate %q", rec, cand)
	}

	// Incident mode, from the decision view.
	run(t, b, "ask the incident question", chromedp.Click("#whatif-incident"))
	settle(t, b, `location.pathname`, "/ui/whatif")
	wait(t, b, "incident mode", `!document.getElementById("incident").hidden && document.querySelectorAll("#recorded option").length === 2`)
	run(t, b, "run the permissive version on it", chromedp.Click(`input[name=kind][value=recorded]`),
		chromedp.SetValue("#recorded", permissive), chromedp.Click("#whatif-start"))
	wait(t, b, "the incident answer", `!!document.getElementById("focus-verdict")`)
	if got := eval[string](t, b, `document.getElementById("focus-verdict").textContent`); !strings.Contains(got, "otherwise") || !strings.Contains(got, "permit.all") {
		t.Errorf("incident answer %q", got)
	}
}
