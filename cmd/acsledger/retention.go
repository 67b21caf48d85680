package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os/user"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/retention"
	"github.com/acsledger/acsledger/ledger/storeopen"
	"github.com/acsledger/acsledger/web/retentionapi"
)

// runRetention is `acsledger retention set|list|delete|sweep`
// (docs/retention.md).
func runRetention(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runSubcommand(ctx, "retention", []command{
		{name: "set", run: retentionSet},
		{name: "list", run: retentionList},
		{name: "delete", run: retentionDelete},
		{name: "sweep", run: retentionSweep},
	}, args, stdout, stderr)
}

// runHold is `acsledger hold set|list|release`.
func runHold(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runSubcommand(ctx, "hold", []command{
		{name: "set", run: holdSet},
		{name: "list", run: holdList},
		{name: "release", run: holdRelease},
	}, args, stdout, stderr)
}

// adminFlagSet is the flag set of an admin subcommand (token, retention,
// hold) with the store flags.
func adminFlagSet(name string, stderr io.Writer) (*flag.FlagSet, *dbFlags) {
	fs := newFlagSet(name, stderr)
	db := new(dbFlags)
	db.register(fs, "store URL: PostgreSQL or the embedded store's directory")
	return fs, db
}

// withRetention opens the store, runs do with a retention service over
// it and closes the store.
func withRetention(ctx context.Context, db dbFlags, opts retention.Options, do func(*retention.Service) error) error {
	st, err := openStore(ctx, db, ledger.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	return do(retention.New(st, opts))
}

// listAdmin is the body of `retention list` and `hold list`: it reads the
// records with read and prints them as JSON with --json, else as a table
// under header with line's cells a row.
func listAdmin[R, J any](ctx context.Context, db dbFlags, asJSON bool, stdout io.Writer,
	read func(context.Context, storeopen.Store) ([]R, error), toJSON func(R) J, header string, line func(J) []string) error {
	st, err := openStore(ctx, db, ledger.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	recs, err := read(ctx, st)
	if err != nil {
		return err
	}
	out := make([]J, 0, len(recs))
	for _, r := range recs {
		out = append(out, toJSON(r))
	}
	if asJSON {
		return printJSON(stdout, out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, j := range out {
		fmt.Fprintln(tw, strings.Join(line(j), "\t"))
	}
	return tw.Flush()
}

// whoami is the OS user, the default of --by.
func whoami(by string) string {
	if by != "" {
		return by
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return ""
}

// badInput turns a refusal naming a field into a usage error (exit 2).
func badInput(err error) error {
	if errors.Is(err, ledger.ErrInvalidRetention) {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return err
}

// parseTime reads an RFC 3339 time or a date (midnight UTC).
func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%w: %s: %q is not an RFC 3339 time or a date (2026-03-01)", errUsage, field, s)
}

func printJSON(w io.Writer, v any) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(v)
}

func retentionSet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, db := adminFlagSet("retention set", stderr)
	name := fs.String("name", "", "the rule's name; setting a rule of an existing name replaces it (required)")
	agent := fs.String("agent", "", "scope: agent ids starting with this prefix (default any)")
	format := fs.String("format", "", "scope: source format: 'guardian' for the Guardian's request params, or an ingest format (opa, bash-guard, bash-guard-audit, a2h, otel-genai) for its records' source (default any)")
	stepType := fs.String("step-type", "", "scope: this step type only (default any)")
	period := fs.String("period", "", "how long payloads are kept, at least a day: 180d, 6mo, 1y, 36h (required)")
	reason := fs.String("reason", "", "why (the regulation or policy), recorded with the rule (required)")
	by := fs.String("by", "", "who sets the rule (default: the OS user name)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *name == "" || *period == "" {
		return fmt.Errorf("%w: --name and --period are required", errUsage)
	}
	d, err := retention.ParsePeriod(*period)
	if err != nil {
		return badInput(err)
	}
	return withRetention(ctx, *db, retention.Options{}, func(svc *retention.Service) error {
		r, err := svc.SetRule(ctx, ledger.Rule{Name: *name, AgentPrefix: *agent, SourceFormat: *format, StepType: *stepType, Period: d, Reason: *reason, SetBy: whoami(*by)})
		if err != nil {
			return badInput(err)
		}
		return printJSON(stdout, retention.NewRuleJSON(r))
	})
}

func retentionList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, db := adminFlagSet("retention list", stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return listAdmin(ctx, *db, *asJSON, stdout, func(ctx context.Context, st storeopen.Store) ([]ledger.Rule, error) { return st.Rules(ctx) },
		retention.NewRuleJSON, "NAME\tPERIOD\tAGENT PREFIX\tFORMAT\tSTEP TYPE\tSET BY\tREASON",
		func(r retention.RuleJSON) []string {
			return []string{r.Name, r.Period, orAny(r.Scope.AgentPrefix), orAny(r.Scope.SourceFormat), orAny(r.Scope.StepType), r.SetBy, r.Reason}
		})
}

func orAny(s string) string {
	if s == "" {
		return "*"
	}
	return s
}

func retentionDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, db := adminFlagSet("retention delete", stderr)
	by := fs.String("by", "", "who deletes the rule (default: the OS user name)")
	name, err := parseOneArg(fs, args, "usage: acsledger retention delete [--db URL] NAME")
	if err != nil {
		return err
	}
	return withRetention(ctx, *db, retention.Options{}, func(svc *retention.Service) error {
		r, err := svc.DeleteRule(ctx, name, whoami(*by))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "deleted retention rule %q\n", r.Name)
		return nil
	})
}

// retentionSweep runs every rule once: for cron, with a URL whose role may
// act as acsledger_eraser (docs/retention.md, "Who may erase").
func retentionSweep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, db := adminFlagSet("retention sweep", stderr)
	batch := fs.Int("batch", retention.DefaultBatch, "payloads read per erasing transaction")
	pause := fs.Duration("pause", 0, "pause between two batches, leaving the database to the Guardian")
	duty := fs.Float64("duty", 0, "the most share of the time the sweep spends erasing, in (0, 1); 0: no cap (docs/retention.md)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *batch <= 0 {
		return fmt.Errorf("%w: --batch must be positive", errUsage)
	}
	if *duty < 0 || *duty >= 1 {
		return fmt.Errorf("%w: --duty must be in [0, 1)", errUsage)
	}
	return withRetention(ctx, *db, retention.Options{Batch: *batch, Pause: *pause, Duty: *duty}, func(svc *retention.Service) error {
		reps, err := svc.Sweep(ctx)
		for _, r := range reps {
			what := "rule " + r.Rule
			if r.Rule == "" {
				what = r.Kind
			}
			rec := ""
			if r.Recovered {
				rec = " (a run cut short, recorded now)"
			}
			fmt.Fprintf(stdout, "%s: erased %d payloads of %d sessions, entries recorded before %s; run %s%s\n", what, r.Erased, len(r.Sessions), r.Before, r.RunID, rec)
		}
		return err
	})
}

// parseOneArg parses flags before or after one positional argument and
// returns it; without one it is a usage error saying usage.
func parseOneArg(fs *flag.FlagSet, args []string, usage string) (string, error) {
	if err := parseArgs(fs, args); err != nil {
		return "", err
	}
	if fs.NArg() == 0 {
		return "", fmt.Errorf("%w: %s", errUsage, usage)
	}
	arg := fs.Arg(0)
	if err := parseFlags(fs, fs.Args()[1:]); err != nil {
		return "", err
	}
	return arg, nil
}

// sessionList is a repeatable --session flag.
type sessionList []string

func (s *sessionList) String() string     { return strings.Join(*s, ",") }
func (s *sessionList) Set(v string) error { *s = append(*s, v); return nil }

func holdSet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, db := adminFlagSet("hold set", stderr)
	caseName := fs.String("case", "", "the case the hold is for; one standing hold per case (required)")
	var sessions sessionList
	fs.Var(&sessions, "session", "scope: this session (repeat for more)")
	agent := fs.String("agent", "", "scope: agent ids starting with this prefix")
	from := fs.String("from", "", "scope: entries recorded at or after this time (RFC 3339 or a date)")
	until := fs.String("until", "", "scope: entries recorded before this time (RFC 3339 or a date)")
	reason := fs.String("reason", "", "why, recorded with the hold (required)")
	by := fs.String("by", "", "who sets the hold (default: the OS user name)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	f, err := parseTime("from", *from)
	if err != nil {
		return err
	}
	u, err := parseTime("until", *until)
	if err != nil {
		return err
	}
	return withRetention(ctx, *db, retention.Options{}, func(svc *retention.Service) error {
		h, err := svc.SetHold(ctx, ledger.Hold{Case: *caseName, Sessions: sessions, AgentPrefix: *agent, From: f, Until: u, Reason: *reason, SetBy: whoami(*by)})
		if err != nil {
			return badInput(err)
		}
		return printJSON(stdout, retention.NewHoldJSON(h))
	})
}

func holdList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, db := adminFlagSet("hold list", stderr)
	all := fs.Bool("all", false, "list released holds too")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return listAdmin(ctx, *db, *asJSON, stdout, func(ctx context.Context, st storeopen.Store) ([]ledger.Hold, error) { return st.Holds(ctx, *all) },
		retention.NewHoldJSON, "CASE\tSESSIONS\tAGENT PREFIX\tFROM\tUNTIL\tSET BY\tSET AT\tRELEASED AT\tREASON",
		func(h retention.HoldJSON) []string {
			return []string{h.Case, strconv.Itoa(len(h.Scope.Sessions)), orAny(h.Scope.AgentPrefix), h.Scope.From, h.Scope.Until, h.SetBy, h.SetAt, h.ReleasedAt, h.Reason}
		})
}

func holdRelease(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, db := adminFlagSet("hold release", stderr)
	reason := fs.String("reason", "", "why the hold is lifted (required)")
	by := fs.String("by", "", "who releases it (default: the OS user name)")
	caseName, err := parseOneArg(fs, args, "usage: acsledger hold release [--db URL] --reason TEXT CASE")
	if err != nil {
		return err
	}
	return withRetention(ctx, *db, retention.Options{}, func(svc *retention.Service) error {
		h, err := svc.ReleaseHold(ctx, caseName, whoami(*by), *reason)
		if err != nil {
			return badInput(err)
		}
		return printJSON(stdout, retention.NewHoldJSON(h))
	})
}

// eraseSubject is `acsledger erase --agent PREFIX --until TIME --reason
// TEXT`: every payload of the agents' entries recorded before the time,
// except under a hold, with one record of the request.
func eraseSubject(ctx context.Context, db dbFlags, agent, until, reason, by string, stdout io.Writer) error {
	u, err := parseTime("--until", until)
	if err != nil {
		return err
	}
	if u.IsZero() {
		return fmt.Errorf("%w: --until is required with --agent", errUsage)
	}
	return withRetention(ctx, db, retention.Options{}, func(svc *retention.Service) error {
		rep, err := svc.Erase(ctx, retention.Request{AgentPrefix: agent, Until: u.Format(time.RFC3339Nano), Reason: reason, By: whoami(by)})
		if err != nil {
			return badInput(err)
		}
		fmt.Fprintf(stdout, "erased %d payloads of %d sessions of agents %q recorded before %s (payloads under a legal hold are kept); request %s recorded in %s\n",
			rep.Erased, len(rep.Sessions), agent, rep.Before, rep.RunID, retention.SessionID(time.Now()))
		return nil
	})
}

// retentionFlags are serve's retention flags (docs/retention.md, "Who may
// erase").
type retentionFlags struct {
	every    time.Duration
	eraserDB string
	batch    int
	pause    time.Duration
	duty     float64
}

func (f *retentionFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&f.every, "retention-every", time.Hour, "sweep the retention rules this often (0: never in this process; run `acsledger retention sweep` from cron)")
	fs.StringVar(&f.eraserDB, "eraser-db", "", "PostgreSQL URL of a role that is a member of acsledger_eraser and acsledger_writer, for the in-process sweeper and the erasure API (the service's own role cannot erase); the embedded store needs none")
	fs.IntVar(&f.batch, "retention-batch", retention.DefaultBatch, "payloads read per erasing transaction of a sweep")
	fs.DurationVar(&f.pause, "retention-pause", 0, "pause between two batches of a sweep, leaving the database to the Guardian")
	fs.Float64Var(&f.duty, "retention-duty", -1, fmt.Sprintf("the most share of the time a sweep spends erasing, in (0, 1); 0: no cap (default %g on the embedded store, whose one writer the sweep shares with the Guardian; %g on PostgreSQL)", retention.EmbeddedDuty, retention.PostgresDuty))
}

// notifier is the Merkle log's wake-up after an append.
type notifier interface{ Notify() }

// open returns the retention routes' options and the sweeper to run every
// f.every (nil when none runs in this process), and a function closing
// the eraser's own store. On PostgreSQL the sweeper and the erasure API
// act through --eraser-db, a second pool as a role that may erase; the
// embedded store has no roles and sweeps through the service's store.
func (f *retentionFlags) open(ctx context.Context, url string, store storeopen.Store, mlog notifier, log *slog.Logger) (retentionapi.Options, *retention.Service, func(), error) {
	if f.batch <= 0 {
		return retentionapi.Options{}, nil, nil, fmt.Errorf("%w: --retention-batch must be positive", errUsage)
	}
	if f.duty >= 1 {
		return retentionapi.Options{}, nil, nil, fmt.Errorf("%w: --retention-duty must be below 1", errUsage)
	}
	t, err := storeopen.Parse(url)
	if err != nil {
		return retentionapi.Options{}, nil, nil, err
	}
	opts := retention.Options{Batch: f.batch, Pause: f.pause, Duty: f.duty, Log: log}
	if f.duty < 0 {
		opts.Duty = retention.PostgresDuty
		if t.Postgres == "" {
			opts.Duty = retention.EmbeddedDuty
		}
	}
	admin := retention.New(store, opts)
	out := retentionapi.Options{Reader: store, Admin: admin}
	closeEraser := func() {}
	switch {
	case t.Postgres == "" && f.eraserDB != "":
		return out, nil, nil, fmt.Errorf("%w: --eraser-db is for PostgreSQL; the embedded store sweeps in-process", errUsage)
	case t.Postgres == "":
		out.Eraser = admin
	case f.eraserDB != "":
		es, err := storeopen.Open(ctx, f.eraserDB, ledger.Options{})
		if err != nil {
			return out, nil, nil, fmt.Errorf("couldn't open the eraser's store %s: %w", redact(f.eraserDB), err)
		}
		closeEraser = func() { es.Close() }
		out.Eraser = retention.New(storeopen.NotifyOnAppend(es, mlog.Notify), opts)
	default:
		log.Info("retention sweeps do not run in this process: the service's role cannot erase; give --eraser-db or run `acsledger retention sweep` with an eraser role from cron")
	}
	if out.Eraser == nil || f.every <= 0 {
		return out, nil, closeEraser, nil
	}
	out.NextSweep = out.Eraser.NextSweep
	return out, out.Eraser, closeEraser, nil
}
