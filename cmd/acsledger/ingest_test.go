package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/acsledger/acsledger/internal/launch"
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
				launch.ExitCode(ts, args[0], args[2], args[3:]...)
			},
		},
	})
}
