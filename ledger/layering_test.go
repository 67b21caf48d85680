package ledger

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayering keeps the ledger below its writers: no package under ledger/
// depends on the Guardian (guardian/...) or on the policy engine (OPA), so
// the tree reads writers -> ledger -> verify. Replay, which runs the
// policy, lives in guardian/replay.
func TestLayering(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go command not found: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	packages := 0
	for _, line := range lines {
		f := strings.Fields(line)
		if !strings.HasPrefix(f[0], "github.com/acsledger/acsledger/ledger") {
			continue
		}
		packages++
		for _, d := range f[1:] {
			if strings.HasPrefix(d, "github.com/acsledger/acsledger/guardian") || strings.HasPrefix(d, "github.com/open-policy-agent/") {
				t.Errorf("%s depends on %s", f[0], d)
				break
			}
		}
	}
	if packages < 2 {
		t.Fatalf("go list named %d ledger packages: %s", packages, out)
	}
}
