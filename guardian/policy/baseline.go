package policy

import (
	"embed"
	"io/fs"
)

// The baseline bundle ships with the Guardian: the ACS §12.1 "baseline
// policy bundle". docs/policy.md lists its rules and reason codes.
const (
	BaselineID      = "acsledger-baseline"
	BaselineVersion = "1.1.0"
)

//go:embed baseline/*.rego baseline/data.json
var baselineFS embed.FS

// Baseline returns the shipped baseline bundle. Changing any of its files
// changes its digest, so its version must change with them: the ledger
// refuses a second digest under a recorded version.
func Baseline() *Bundle {
	sub, err := fs.Sub(baselineFS, "baseline")
	if err != nil {
		panic(err)
	}
	b, err := BundleFromFS(sub, BaselineID, BaselineVersion)
	if err != nil {
		panic("embedded baseline bundle is unreadable: " + err.Error())
	}
	return b
}
