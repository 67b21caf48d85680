package verify

// Test helpers for the external test package verify_test.
var (
	ReadTestFile  = readTestFile
	GlobTestFiles = globTestFiles
	OpenTestFile  = openTestFile
)
