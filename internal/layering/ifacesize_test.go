package layering

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// maxMethods is the most methods an interface that a package declares or
// receives may have (issue 20): a consumer names the few store methods it
// calls. Only ledger/storeopen, which opens a store, and cmd, which wires
// one, handle the whole of it.
const maxMethods = 12

// wholeStoreAllowed reports whether the package at local path p may
// declare or receive an interface of any size. internal/evidencetest is
// the tests' storeopen: a fixture that opens a store by URL and hands the
// tests all of it; TestInterfaceSize checks that no binary links it.
func wholeStoreAllowed(p string) bool {
	return under(p, "ledger/storeopen") || under(p, "cmd") || p == "internal/evidencetest"
}

// typedPkg is what `go list -export` says of one package: where its
// compiled export data is, and its non-test Go files.
type typedPkg struct {
	ImportPath string
	Dir        string
	Export     string
	GoFiles    []string
	Module     *struct{ Path string }
}

// TestInterfaceSize type-checks every package of the module outside
// ledger/storeopen and cmd from its non-test files and fails for every
// interface it declares (a named interface type or an interface literal)
// and every parameter or struct field of interface type it takes, whose
// method set, embedded interfaces included, has more than maxMethods
// methods.
func TestInterfaceSize(t *testing.T) {
	pkgs := listTyped(t)
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		p, ok := pkgs[path]
		if !ok || p.Export == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(p.Export)
	})
	checked := 0
	var paths []string
	for path := range pkgs {
		paths = append(paths, path)
	}
	sort.Strings(paths)
	for _, path := range paths {
		p := pkgs[path]
		if p.Module == nil || p.Module.Path != module || wholeStoreAllowed(local(path)) || len(p.GoFiles) == 0 {
			continue
		}
		for _, v := range wideInterfaces(t, fset, imp, p) {
			t.Error(v)
		}
		checked++
	}
	if checked < 20 {
		t.Fatalf("checked only %d packages of the module", checked)
	}
	for path, p := range listModule(t) {
		if under(path, "cmd") && slices.Contains(p.Deps, module+"/internal/evidencetest") {
			t.Errorf("%s links internal/evidencetest, which may hold the whole store only because no binary links it", path)
		}
	}
}

// wideInterfaces type-checks p and describes each interface in it wider
// than maxMethods.
func wideInterfaces(t *testing.T, fset *token.FileSet, imp types.Importer, p typedPkg) []string {
	t.Helper()
	var files []*ast.File
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		files = append(files, f)
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	conf := types.Config{Importer: imp}
	if _, err := conf.Check(p.ImportPath, fset, files, info); err != nil {
		t.Fatalf("type-check %s: %v", p.ImportPath, err)
	}
	var out []string
	// wide reports e if it is an interface wider than maxMethods. A
	// parameter, result or field (declared false) counts only if its type
	// is the module's own: testing.TB or chi.Router are not contracts of
	// this tree.
	wide := func(e ast.Expr, what string, declared bool) {
		tv, ok := info.Types[e]
		if !ok {
			return
		}
		if !declared && !ownType(tv.Type) {
			return
		}
		if it, ok := tv.Type.Underlying().(*types.Interface); ok && it.NumMethods() > maxMethods {
			out = append(out, fmt.Sprintf("%s: %s %s has %d methods, more than %d: declare the few the package calls",
				fset.Position(e.Pos()), what, types.ExprString(e), it.NumMethods(), maxMethods))
		}
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.InterfaceType:
				wide(n, "the interface", true)
			case *ast.FuncType:
				for _, fl := range []*ast.FieldList{n.Params, n.Results} {
					if fl != nil {
						for _, fd := range fl.List {
							wide(fd.Type, "the parameter or result of type", false)
						}
					}
				}
			case *ast.StructType:
				for _, fd := range n.Fields.List {
					wide(fd.Type, "the field of type", false)
				}
			}
			return true
		})
	}
	return out
}

// ownType reports whether t is a type the module declares (a named type of
// one of its packages, or an interface literal, which a package of the
// module wrote).
func ownType(t types.Type) bool {
	switch t := types.Unalias(t).(type) {
	case *types.Named:
		pkg := t.Obj().Pkg()
		return pkg != nil && (pkg.Path() == module || strings.HasPrefix(pkg.Path(), module+"/"))
	case *types.Interface:
		return true
	}
	return false
}

// listTyped runs `go list -deps -export` over the module and returns every
// package it lists, dependencies included, by import path.
func listTyped(t *testing.T) map[string]typedPkg {
	t.Helper()
	return goList(t, func(p typedPkg) string { return p.ImportPath }, "-deps", "-export", "-json=ImportPath,Dir,Export,GoFiles,Module", "./...")
}
