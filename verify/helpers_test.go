package verify

import (
	"os"
	"path/filepath"
	"testing"
)

// readTestFile returns the file at the joined path, failing the test if it
// cannot be read.
func readTestFile(tb testing.TB, elem ...string) []byte {
	tb.Helper()
	return atPath(tb, os.ReadFile, elem)
}

// globTestFiles returns the files matching the joined pattern, failing the
// test if the pattern is malformed.
func globTestFiles(tb testing.TB, elem ...string) []string {
	tb.Helper()
	return atPath(tb, filepath.Glob, elem)
}

// openTestFile opens the file at the joined path, failing the test if it
// cannot be opened, and closes it when the test ends.
func openTestFile(tb testing.TB, elem ...string) *os.File {
	tb.Helper()
	f := atPath(tb, os.Open, elem)
	tb.Cleanup(func() { f.Close() })
	return f
}

// atPath calls f with the joined path and fails the test on its error.
func atPath[T any](tb testing.TB, f func(string) (T, error), elem []string) T {
	tb.Helper()
	v, err := f(filepath.Join(elem...))
	if err != nil {
		tb.Fatal(err)
	}
	return v
}
