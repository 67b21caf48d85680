package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestIngestScript runs `acsledger ingest` as a binary (the one TestMain
// built) through the scripts in testdata/ingest, the command-line contract
// of docs/ingest.md. `exitcode N exec acsledger ...` requires exit status N.
func TestIngestScript(t *testing.T) {
	// The scripts verify exported bundles with the auditor's CLI.
	verifier := filepath.Join(filepath.Dir(binary), "acsverify")
	if out, err := exec.Command("go", "build", "-o", verifier, "../acsverify").CombinedOutput(); err != nil {
		t.Fatalf("couldn't build acsverify: %v\n%s", err, out)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "ingest"),
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", filepath.Dir(binary)+string(os.PathListSeparator)+env.Getenv("PATH"))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) < 3 || args[1] != "exec" {
					ts.Fatalf("usage: exitcode N exec command [args...]")
				}
				want, err := strconv.Atoi(args[0])
				if err != nil {
					ts.Fatalf("exitcode: %v", err)
				}
				got := 0
				if err := ts.Exec(args[2], args[3:]...); err != nil {
					var ee *exec.ExitError
					if !errors.As(err, &ee) {
						ts.Fatalf("exitcode: %v", err)
					}
					got = ee.ExitCode()
				}
				if got != want {
					ts.Fatalf("%s exited with status %d, want %d", args[2], got, want)
				}
			},
		},
	})
}
