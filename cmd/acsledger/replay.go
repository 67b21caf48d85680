package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	decisionreplay "github.com/acsledger/acsledger/guardian/replay"
)

// errDecisionDiffers is returned when a replay reaches another decision
// than the recorded one: the command exits 1 after printing the diff.
var errDecisionDiffers = errors.New("the replayed decision differs from the recorded one")

// runReplay re-evaluates a recorded decision (guardian/replay).
func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("replay", stderr)
	var db paramsDBFlags
	db.register(fs, "key directory, as for serve, holding the master key of request params at rest (default: keys/ beside the embedded store or ./acsledger-keys)")
	version := fs.String("policy-version", "", "evaluate under this recorded version of the cited policy instead of the recorded one")
	session := fs.String("session", "", "the session of the request (optional; without it every session is scanned)")
	paramsFile := fs.String("params", "", "FILE holding the request's params as sent, or the whole request envelope (\"-\" for stdin); default: the params stored in the ledger")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	setUsage(fs, stderr, "usage: acsledger replay [--db URL] [--policy-version V] [--session ID] [--json] [--params FILE] REQUEST_ID")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want exactly one REQUEST_ID after the flags, got %d arguments", errUsage, fs.NArg())
	}
	var params json.RawMessage
	if *paramsFile != "" {
		var err error
		if params, err = readParams(*paramsFile); err != nil {
			return err
		}
	}
	store, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	res, err := decisionreplay.Replay(ctx, store, decisionreplay.Request{RequestID: fs.Arg(0), SessionID: *session, Params: params, PolicyVersion: *version})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "request %s: session %s, position %d, %s\n", res.RequestID, res.SessionID, res.Position, res.Method)
		fmt.Fprintf(stdout, "recorded under %s %s, replayed under %s %s\n", res.PolicyID, res.RecordedVersion, res.PolicyID, res.ReplayedVersion)
		fmt.Fprintf(stdout, "params from the %s\n", map[string]string{"ledger": "ledger", "request": "--params file"}[res.ParamsFrom])
		if res.Same {
			fmt.Fprintf(stdout, "same decision: %s\n", res.Replayed.Disposition)
		} else {
			fmt.Fprintln(stdout, "different decision (recorded != replayed):")
			for _, d := range res.Diff {
				fmt.Fprintf(stdout, "  %s\n", d)
			}
		}
		for _, n := range res.NotReconstructed {
			fmt.Fprintf(stdout, "note: %s could not be rebuilt from the ledger\n", n)
		}
	}
	if !res.Same {
		return errDecisionDiffers
	}
	return nil
}

// readParams reads the request's params from a file: either the params
// object itself or a whole JSON-RPC request envelope, whose params are
// taken exactly as they appear.
func readParams(name string) (json.RawMessage, error) {
	var b []byte
	var err error
	if name == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, fmt.Errorf("couldn't read --params: %w", err)
	}
	var env struct {
		JSONRPC string          `json:"jsonrpc"`
		Params  json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, fmt.Errorf("--params %s is not a JSON object: %w", name, err)
	}
	if env.JSONRPC != "" && env.Params != nil {
		return env.Params, nil
	}
	return b, nil
}
