package policy

import "testing"

// BaselineCaseInputs returns the name and the Input of every case in
// testdata/baseline_cases.json, for tests outside the package.
func BaselineCaseInputs(t *testing.T) ([]string, []*Input) {
	var names []string
	var ins []*Input
	for _, c := range loadBaselineCases(t) {
		names = append(names, c.Name)
		ins = append(ins, c.input(t))
	}
	return names, ins
}
