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
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go command not found: %v", err)
	}
	gomod, err := exec.Command(gobin, "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	cmd := exec.Command(gobin, "list", "-json=ImportPath,Imports,Deps", "./...")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("couldn't decode go list output: %v", err)
		}
		pkgs[local(p.ImportPath)] = p
	}
	// The list must be the real one: it holds the layers the rules name.
	for _, want := range []string{"acs", "guardian", "ledger", "ledger/tlog", "verify", "web", "cmd/acsverify", "cmd/acsledger"} {
		if _, ok := pkgs[want]; !ok {
			t.Fatalf("go list does not list %s/%s; got %d packages", module, want, len(pkgs))
		}
	}
	return pkgs
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

// layer names the upper layers a package of a lower one must not import.
// The data flows acs -> guardian -> ledger -> verify -> web and cmd, but a
// writer calls the store it writes to, and the store reads its notes with
// verify's readers, so what is forbidden is the other way round: a layer
// reaching into one that builds on it.
var layers = []struct {
	dir       string
	forbidden []string
}{
	{"acs", []string{"guardian", "ledger", "verify", "web", "cmd"}},
	{"verify", []string{"guardian", "ledger", "web", "cmd"}},
	{"ledger", []string{"guardian", "web", "cmd"}},
	{"guardian", []string{"web", "cmd"}},
}

// TestLayers: no package imports, directly or not, a package of a layer
// that builds on its own.
func TestLayers(t *testing.T) {
	t.Parallel()
	pkgs := listModule(t)
	for _, l := range layers {
		for path, p := range pkgs {
			if !under(path, l.dir) {
				continue
			}
			for _, d := range p.Deps {
				for _, up := range l.forbidden {
					if under(local(d), up) {
						t.Errorf("%s depends on %s: %s must not import %s", path, local(d), l.dir, up)
					}
				}
			}
		}
	}
}

// TestLedgerHasNoPolicyEngine: the store keeps evidence of decisions; it
// never makes one, so nothing under ledger/ links OPA.
func TestLedgerHasNoPolicyEngine(t *testing.T) {
	t.Parallel()
	for path, p := range listModule(t) {
		if !under(path, "ledger") {
			continue
		}
		if d := firstMatch(p.Deps, isOPA); d != "" {
			t.Errorf("%s depends on %s (and %d OPA packages in all): nothing under ledger/ may link OPA", path, d, count(p.Deps, isOPA))
		}
	}
}

// TestMerkleLogHasNoDatabase: the Merkle log is pure; each store provides
// its log storage, so nothing under ledger/tlog links a database driver.
func TestMerkleLogHasNoDatabase(t *testing.T) {
	t.Parallel()
	for path, p := range listModule(t) {
		if !under(path, "ledger/tlog") {
			continue
		}
		if d := firstMatch(p.Deps, isDatabase); d != "" {
			t.Errorf("%s depends on %s: nothing under ledger/tlog may link database/sql or a database driver", path, d)
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
