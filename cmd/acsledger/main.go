// Command acsledger runs the acsledger service and its administration tasks.
//
//	acsledger serve    [--addr 127.0.0.1:8080] [--db URL]   run the service
//	acsledger migrate  --db URL                             apply SQL migrations
//	acsledger guardian --stdio [--db URL] [--keys DIR]      the Guardian over stdio
//	acsledger keygen   --dir DIR [--alg ALG,...]            write signing keys
//	acsledger token    create --role ROLE [--name N] [--scope AGENT_PREFIX] [--expires DURATION] [--db URL]
//	                                                        make an API token (printed once)
//	acsledger token    list [--db URL] | revoke [--db URL] NAME
//	acsledger log-key  [--db URL] [--keys DIR] [--trust-file] print the Merkle log's origin and verifier keys (or an acsverify trust file)
//	acsledger witness  --state FILE --log-origin O --log-key VKEY [--addr ADDR]
//	                                                        run a minimal tlog-witness for one log
//	acsledger export   --session ID [--out FILE] [--db URL] [--keys DIR]
//	                                                        write a session's evidence bundle
//	acsledger receipt  --session ID --position N [--out FILE] [--db URL] [--keys DIR]
//	                                                        write one entry's receipt (.tlog-proof)
//	acsledger replay   [--db URL] [--session ID] REQUEST_ID re-evaluate a recorded decision
//	acsledger whatif   --policy DIR|BUNDLE.tar.gz [--since T] [--until T] [--tool NAME] [--json] [--db URL]
//	                                                        run a candidate policy over recorded decisions
//	acsledger erase    --db URL --session ID --position N --reason TEXT [--by NAME]
//	                                                        erase a step's request params
//	acsledger erase    --db URL --agent PREFIX --until TIME --reason TEXT
//	                                                        erase a subject's payloads (except under a hold)
//	acsledger retention set --name N --period 180d --reason TEXT [--agent P] [--format F] [--step-type T]
//	acsledger retention list | delete NAME | sweep [--batch N] [--pause D]
//	acsledger hold     set --case C [--session ID]... [--agent P] [--from T] [--until T] --reason TEXT
//	acsledger hold     list [--all] | release --reason TEXT CASE
//	acsledger ingest   --format F [--db URL] [--json] FILE... take in other guards' records
//	acsledger bench    guardian [--url URL] [--sessions N,...] [--peer opa-server]  measure the Guardian beside OPA's server and bare OPA
//	acsledger bench    soak [--duration D] [--rate R] [--sessions N] [--out DIR]
//	                                                        hold half the maximum rate and watch for growth
//	acsledger demo     [--url URL] [--keys DIR]             drive a running server and verify its evidence
//
// With no --db the service keeps its evidence in an embedded SQLite store
// under ./acsledger-data; --db postgres://... uses PostgreSQL. Run
// 'acsledger <command> -h' for a command's flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/acsledger/acsledger/internal/logthrottle"
)

// command is one subcommand: its name, one-line summary and entry point.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"serve", "run the service (embedded store by default)", runServe},
		{"migrate", "apply SQL migrations to a store", runMigrate},
		{"guardian", "serve the ACS Guardian over stdio (--stdio)", runGuardian},
		{"keygen", "write new signing keys into a directory", runKeygen},
		{"log-key", "print the Merkle log's origin and note verifier keys", runLogKey},
		{"witness", "run a minimal tlog-witness for one log", runWitness},
		{"export", "write a session's evidence bundle (--session ID)", runExport},
		{"receipt", "write one entry's receipt, a .tlog-proof (--session ID --position N)", runReceipt},
		{"replay", "re-evaluate a recorded decision (REQUEST_ID)", runReplay},
		{"whatif", "run a candidate policy over recorded decisions (--policy DIR)", runWhatIf},
		{"token", "manage API tokens: create --role ROLE, list, revoke NAME", runToken},
		{"erase", "erase a step's stored request params (--session ID --position N), or a subject's (--agent PREFIX --until TIME)", runErase},
		{"retention", "retention rules: set, list, delete, sweep", runRetention},
		{"hold", "legal holds: set, list, release CASE", runHold},
		{"ingest", "take in OPA, bash-guard, A2H or ACS records (--format F FILE...)", runIngest},
		{"bench", "measure the Guardian under load beside bare OPA (bench guardian)", runBench},
		{"demo", "send a short agent workload to a running server and verify its evidence", runDemo},
	}
}

// runSubcommand runs the subcommand of cmd that args[0] names among subs
// (token, retention and hold have several).
func runSubcommand(ctx context.Context, cmd string, subs []command, args []string, stdout, stderr io.Writer) error {
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.name
	}
	want := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	if len(args) == 0 {
		return fmt.Errorf("%w: %s needs a subcommand: %s", errUsage, cmd, want)
	}
	for _, s := range subs {
		if s.name == args[0] {
			return s.run(ctx, args[1:], stdout, stderr)
		}
	}
	return fmt.Errorf("%w: unknown %s subcommand %q (want %s)", errUsage, cmd, args[0], want)
}

// errUsage marks errors caused by how the command was invoked; they exit 2.
var errUsage = errors.New("usage")

func main() {
	tuneGC(os.Getenv)
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			fmt.Fprintf(stderr, "acsledger %s: %v\n", c.name, err)
			return 2
		default:
			fmt.Fprintf(stderr, "acsledger %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "acsledger: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: acsledger <command> [flags]")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'acsledger <command> -h' for a command's flags.")
}

// newFlagSet returns a FlagSet that reports errors instead of exiting.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("acsledger "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// setUsage makes -h print line, then the flags.
func setUsage(fs *flag.FlagSet, stderr io.Writer, line string) {
	fs.Usage = func() {
		fmt.Fprintln(stderr, line)
		fs.PrintDefaults()
	}
}

// parseArgs parses args: -h is flag.ErrHelp, a bad flag a usage error.
func parseArgs(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}

// parseFlags parses args and refuses positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	return nil
}

func newLogger(w io.Writer) *slog.Logger {
	h := slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo})
	return slog.New(logthrottle.New(h, logRepeatInterval, nil))
}

// logRepeatInterval is how often one warning or error message may be
// logged: during an outage that fails every request, a line per message
// per interval with the count of repeats (docs/operations.md).
const logRepeatInterval = 5 * time.Second
