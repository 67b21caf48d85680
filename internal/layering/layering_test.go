package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/acsledger/acsledger"

// pkg is what `go list -json` says of one package of the module: its
// direct imports and all its dependencies, test files left out.
type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// listModule runs `go list -json ./...` at the module root and returns the
// module's packages by import path, without the module prefix.
func listModule(t *testing.T) map[string]pkg {
	t.Helper()
	pkgs := goList(t, func(p pkg) string { return local(p.ImportPath) }, "-json=ImportPath,Imports,Deps", "./...")
	// The list must be the real one: it holds the layers the rules name.
	for _, want := range []string{"acs", "guardian", "ingest", "ledger", "ledger/tlog", "verify", "web", "cmd/acsverify", "cmd/acsledger"} {
		if !anyUnder(pkgs, want) {
			t.Fatalf("go list lists nothing under %s/%s; got %d packages", module, want, len(pkgs))
		}
	}
	return pkgs
}

// goList runs `go list args...` at the module root and returns the
// packages of its JSON output by key(package).
func goList[P any](t *testing.T, key func(P) string, args ...string) map[string]P {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go command not found: %v", err)
	}
	gomod, err := exec.Command(gobin, "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	cmd := exec.Command(gobin, append([]string{"list"}, args...)...)
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	pkgs := map[string]P{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p P
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs
		} else if err != nil {
			t.Fatalf("couldn't decode go list output: %v", err)
		}
		pkgs[key(p)] = p
	}
}

// local strips the module prefix from a path of the module.
func local(path string) string {
	if path == module {
		return "."
	}
	if rest, ok := strings.CutPrefix(path, module+"/"); ok {
		return rest
	}
	return path
}

// anyUnder reports whether pkgs holds dir or a package below it.
func anyUnder(pkgs map[string]pkg, dir string) bool {
	for path := range pkgs {
		if under(path, dir) {
			return true
		}
	}
	return false
}

// under reports whether path is dir or a package below it.
func under(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// Classes of dependency the rules forbid, by import path.
var (
	isOPA = func(p string) bool { return under(p, "github.com/open-policy-agent") }
	// isDatabase matches database/sql and the drivers the stores use or
	// could: pgx, lib/pq, modernc and mattn SQLite.
	isDatabase = func(p string) bool {
		return under(p, "database/sql") || under(p, "github.com/jackc/pgx") ||
			under(p, "github.com/lib/pq") || under(p, "modernc.org/sqlite") || under(p, "github.com/mattn/go-sqlite3")
	}
	isHTTP = func(p string) bool { return under(p, "net/http") }
)

// layers holds the rules of the one-way house, one row per directory of
// the module (a prefix of import paths: the row holds dir and every package
// below it, so a package split into subpackages keeps its row). The data
// flows acs -> guardian / ingest -> ledger -> verify -> web and cmd, but a
// writer calls the store it writes to, and the store reads its notes with
// verify's readers, so what is forbidden is the other way round: a layer
// reaching into one that builds on it. A new top-level package gets a row
// here; TestLayers fails on a row whose dir holds no package, so a row
// cannot outlive what it names.
var layers = []layer{
	{dir: "acs", forbidden: []string{"guardian", "ingest", "ledger", "verify", "web", "cmd"}},
	{dir: "verify", forbidden: []string{"guardian", "ingest", "ledger", "web", "cmd"}},
	{dir: "ledger", forbidden: []string{"guardian", "ingest", "web", "cmd"}},
	{dir: "guardian", forbidden: []string{"web", "cmd"}},
	// ingest is a writer beside the Guardian: it turns other guards'
	// records into entries through the ledger's contracts (ledger.Store's
	// records and results), never through a store implementation, and it
	// owes nothing to the Guardian.
	{dir: "ingest", forbidden: []string{"guardian", "web", "cmd"}, allowed: []string{"acs/...", "ledger"}},
	{dir: "web", forbidden: []string{"cmd"}},
	// The SQL migrations are data embedded in Go; they import nothing of
	// the module.
	{dir: "migrations", forbidden: []string{"acs", "guardian", "ingest", "ledger", "verify", "web", "cmd"}},
}

// A layer is a row of layers.
type layer struct {
	dir string
	// forbidden are the dirs whose packages dir's may not depend on,
	// directly or not.
	forbidden []string
	// allowed, when not nil, is everything else of the module dir's
	// packages may depend on: "X/..." is X and every package below it; a
	// bare "X" is package X and what X itself depends on (its contract,
	// not the implementations that live below it).
	allowed []string
}

// unlayered are the top-level directories that have no row in layers, and
// why. Any other top-level directory needs a row: TestEveryDirectoryHasARule.
var unlayered = map[string]string{
	"cmd":      "the programs are the top layer: they wire every other",
	"internal": "helpers for tests and processes (database harnesses, drills, this test), each imported only where it is needed",
}

// TestEveryDirectoryHasARule: a new top-level directory of packages gets a
// row in layers (or a reason in unlayered), so the rules keep describing
// the tree as it grows.
func TestEveryDirectoryHasARule(t *testing.T) {
	t.Parallel()
	for path := range listModule(t) {
		top, _, _ := strings.Cut(path, "/")
		if _, ok := unlayered[top]; ok || slices.ContainsFunc(layers, func(l layer) bool { return under(path, l.dir) }) {
			continue
		}
		t.Errorf("%s has no rule: add a row for %s to layers (or say in unlayered why it needs none)", path, top)
	}
}

// TestLayers: no package depends, directly or not, on a package of a layer
// that builds on its own, nor on anything its row does not allow.
func TestLayers(t *testing.T) {
	t.Parallel()
	pkgs := listModule(t)
	for _, l := range layers {
		if !anyUnder(pkgs, l.dir) {
			t.Errorf("the rule for %s holds no package: go list lists none under it", l.dir)
		}
		for path, p := range pkgs {
			if !under(path, l.dir) {
				continue
			}
			for _, d := range p.Deps {
				d = local(d)
				if up := slices.IndexFunc(l.forbidden, func(up string) bool { return under(d, up) }); up >= 0 {
					t.Errorf("%s depends on %s: %s must not import %s", path, d, l.dir, l.forbidden[up])
				} else if l.allowed != nil && inModule(pkgs, d) && !under(d, l.dir) && !allowed(pkgs, l.allowed, d) {
					t.Errorf("%s depends on %s: %s may import only %s", path, d, l.dir, strings.Join(l.allowed, ", "))
				}
			}
		}
	}
}

// inModule reports whether the local path d names a package of the module.
func inModule(pkgs map[string]pkg, d string) bool {
	_, ok := pkgs[d]
	return ok
}

// allowed reports whether the module package d is one of allow (see
// layers).
func allowed(pkgs map[string]pkg, allow []string, d string) bool {
	for _, a := range allow {
		if dir, ok := strings.CutSuffix(a, "/..."); ok {
			if under(d, dir) {
				return true
			}
			continue
		}
		if d == a || slices.Contains(pkgs[a].Deps, module+"/"+d) {
			return true
		}
	}
	return false
}

// TestLedgerHasNoPolicyEngine: the store keeps evidence of decisions; it
// never makes one, so nothing under ledger/ links OPA.
func TestLedgerHasNoPolicyEngine(t *testing.T) {
	t.Parallel()
	forbidDeps(t, listModule(t), "ledger", "OPA", isOPA)
}

// TestMerkleLogHasNoDatabase: the Merkle log is pure; each store provides
// its log storage, so nothing under ledger/tlog links a database driver.
func TestMerkleLogHasNoDatabase(t *testing.T) {
	t.Parallel()
	forbidDeps(t, listModule(t), "ledger/tlog", "database/sql or a database driver", isDatabase)
}

// forbidDeps fails t for every package under dir that depends on one that
// match reports, naming the first and how many there are.
func forbidDeps(t *testing.T, pkgs map[string]pkg, dir, what string, match func(string) bool) {
	t.Helper()
	for path, p := range pkgs {
		if !under(path, dir) {
			continue
		}
		if d := firstMatch(p.Deps, match); d != "" {
			t.Errorf("%s depends on %s (and %d such packages in all): nothing under %s/ may link %s", path, d, count(p.Deps, match), dir, what)
		}
	}
}

// TestVerifierIsOffline: an auditor builds verify and cmd/acsverify with no
// database driver, no HTTP and no policy engine in the dependency graph
// (verify's own TestPurity, in verify/chain_test.go, also holds its direct
// imports to acs, the note, Merkle and ML-DSA-44 libraries and keeps it
// off the clock).
func TestVerifierIsOffline(t *testing.T) {
	t.Parallel()
	pkgs := listModule(t)
	for _, path := range []string{"verify", "cmd/acsverify"} {
		p := pkgs[path]
		for _, rule := range []struct {
			what  string
			match func(string) bool
		}{
			{"a database driver or database/sql", isDatabase},
			{"net/http", isHTTP},
			{"OPA", isOPA},
		} {
			if d := firstMatch(p.Deps, rule.match); d != "" {
				t.Errorf("%s depends on %s: it may not link %s", path, d, rule.what)
			}
		}
		if !slices.Contains(p.Deps, module+"/acs") {
			t.Errorf("%s does not depend on acs: go list gave %d dependencies", path, len(p.Deps))
		}
	}
}

// TestWebReachesOPAOnlyThroughTheGuardian: the web server mounts the
// Guardian's packages (the policy layer, replay), which use OPA; web itself
// imports no OPA package, and every package it imports that links OPA is
// one of the Guardian's or another of web's (which this test checks in
// turn).
func TestWebReachesOPAOnlyThroughTheGuardian(t *testing.T) {
	t.Parallel()
	pkgs := listModule(t)
	for path, p := range pkgs {
		if !under(path, "web") {
			continue
		}
		for _, imp := range p.Imports {
			switch dep, inModule := pkgs[local(imp)]; {
			case isOPA(imp):
				t.Errorf("%s imports %s: web may reach OPA only through the Guardian's packages", path, imp)
			case inModule && !under(local(imp), "guardian") && !under(local(imp), "web") && firstMatch(dep.Deps, isOPA) != "":
				t.Errorf("%s imports %s, which links OPA (%s): web may reach OPA only through the Guardian's packages", path, local(imp), firstMatch(dep.Deps, isOPA))
			}
		}
	}
}

// firstMatch returns the first of deps that match reports, or "".
func firstMatch(deps []string, match func(string) bool) string {
	for _, d := range deps {
		if match(d) {
			return d
		}
	}
	return ""
}

func count(deps []string, match func(string) bool) int {
	n := 0
	for _, d := range deps {
		if match(d) {
			n++
		}
	}
	return n
}
