package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/acsledger/acsledger/internal/launch"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){"acsverify": main})
}

// TestScript runs acsverify as a binary through the scripts in
// testdata/script. Each script's $WORK/corpus, $WORK/bundles, $WORK/events,
// $WORK/heads and $WORK/cose hold the tamper corpora and COSE receipt
// vectors of package verify (verify/testdata/corpus, bundles, events, heads
// and cose), `exitcode N command args...` runs a command and requires exit
// status N, and `flipbyte FILE N` changes byte N of FILE.
func TestScript(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			for _, dir := range []string{"corpus", "bundles", "events", "heads", "cose"} {
				if err := copyDir(filepath.Join("..", "..", "verify", "testdata", dir), filepath.Join(env.WorkDir, dir)); err != nil {
					return err
				}
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) < 2 {
					ts.Fatalf("usage: exitcode N command [args...]")
				}
				launch.ExitCode(ts, args[0], args[1], args[2:]...)
			},
			// flipbyte FILE N: flip the low bit of byte N of FILE (from the
			// end when N is negative), for the mangling cases of binary
			// receipts.
			"flipbyte": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 2 {
					ts.Fatalf("usage: flipbyte FILE N")
				}
				n, err := strconv.Atoi(args[1])
				ts.Check(err)
				b, err := os.ReadFile(ts.MkAbs(args[0]))
				ts.Check(err)
				if n < 0 {
					n += len(b)
				}
				b[n] ^= 1
				ts.Check(os.WriteFile(ts.MkAbs(args[0]), b, 0o644))
			},
		},
	})
}

// copyDir copies the files of src into a new directory dst.
func copyDir(src, dst string) error {
	files, err := filepath.Glob(filepath.Join(src, "*"))
	if err != nil || len(files) == 0 {
		return errors.New("no files in " + src)
	}
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// TestNoDatabaseDriver keeps cmd/acsverify buildable by an auditor with no
// database driver in its dependency graph.
func TestNoDatabaseDriver(t *testing.T) {
	t.Parallel()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go command not found: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	forbidden := []string{"database/sql", "github.com/jackc/pgx", "github.com/lib/pq", "sqlite"}
	seen := map[string]bool{}
	for _, d := range deps {
		seen[d] = true
		for _, f := range forbidden {
			if strings.Contains(d, f) {
				t.Errorf("cmd/acsverify depends on %s", d)
			}
		}
	}
	// The list must be the real one: it names what acsverify is built on.
	for _, want := range []string{"github.com/acsledger/acsledger/verify", "github.com/acsledger/acsledger/acs", "flag"} {
		if !seen[want] {
			t.Errorf("go list -deps does not list %s; got %d packages", want, len(deps))
		}
	}
}
