package guardian_test

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// testRef is a test named in a table cell: `TestX`, `TestX/row/...`, or
// qualified with its package directory, `acs/sig.TestX`.
var testRef = regexp.MustCompile(`^(?:([a-z0-9_/]+)\.)?((?:Test|Fuzz)[A-Za-z0-9_]+)(/.*)?$`)

var testFunc = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)[A-Za-z0-9_]+)\(`)

// TestConformanceTableNamesTests lists the rows of docs/conformance.md
// whose named test does not exist: every row must name at least one test;
// an unqualified name is a test function of package guardian, a qualified
// one of the named directory; and each named subtest row (a path element
// other than * or ...) must appear as a string in that directory's Go
// files, spaces written as underscores. It also requires the Divergences
// section.
func TestConformanceTableNamesTests(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "conformance.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, []byte("\n## Divergences\n")) {
		t.Errorf("docs/conformance.md has no Divergences section")
	}

	funcs := map[string]map[string]bool{} // directory -> test functions
	sources := map[string][]byte{}        // directory -> its Go files
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(p))
		dir = filepath.ToSlash(dir)
		sources[dir] = append(sources[dir], b...)
		if strings.HasSuffix(p, "_test.go") {
			for _, m := range testFunc.FindAllSubmatch(b, -1) {
				if funcs[dir] == nil {
					funcs[dir] = map[string]bool{}
				}
				funcs[dir][string(m[1])] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	rows := 0
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for line := 1; sc.Scan(); line++ {
		row := sc.Text()
		if !strings.HasPrefix(row, "| ") || strings.HasPrefix(row, "| requirement |") || strings.HasPrefix(row, "| --- ") {
			continue
		}
		cells := strings.Split(strings.Trim(row, "| "), " | ")
		if len(cells) < 2 {
			continue
		}
		rows++
		named := 0
		last := cells[len(cells)-1]
		for _, tok := range backticked(last) {
			m := testRef.FindStringSubmatch(tok)
			if m == nil {
				continue
			}
			named++
			dir := m[1]
			if dir == "" {
				dir = "guardian"
			}
			if !funcs[dir][m[2]] {
				t.Errorf("docs/conformance.md:%d names %s, but %s has no func %s", line, tok, dir, m[2])
				continue
			}
			for _, sub := range strings.Split(strings.TrimPrefix(m[3], "/"), "/") {
				if sub == "" || sub == "*" || strings.HasPrefix(sub, "...") {
					continue
				}
				lit := regexp.MustCompile(`"` + strings.ReplaceAll(regexp.QuoteMeta(sub), "_", "[ _]") + `"`)
				if !lit.Match(sources[dir]) {
					t.Errorf("docs/conformance.md:%d names %s, but no subtest %q is in %s", line, tok, sub, dir)
				}
			}
		}
		if named == 0 {
			t.Errorf("docs/conformance.md:%d names no test: %s", line, row)
		}
	}
	if rows < 50 {
		t.Errorf("read only %d rows from docs/conformance.md", rows)
	}
}

// backticked returns the `code spans` of s.
func backticked(s string) []string {
	var out []string
	for {
		i := strings.IndexByte(s, '`')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(s[i+1:], '`')
		if j < 0 {
			return out
		}
		out = append(out, s[i+1:i+1+j])
		s = s[i+1+j+1:]
	}
}
