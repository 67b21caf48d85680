package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/acsledger/acsledger/guardian/whatif"
	"github.com/acsledger/acsledger/internal/term"
	"github.com/acsledger/acsledger/ledger"
)

// errWhatIfChanged is returned when the candidate would change a recorded
// decision: the command exits 1 after its report.
var errWhatIfChanged = errors.New("the candidate would change recorded decisions")

// runWhatIf runs a candidate policy over recorded history (guardian/whatif,
// docs/whatif.md).
func runWhatIf(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("whatif", stderr)
	var db paramsDBFlags
	db.register(fs, "key directory, as for serve, holding the master key of request params at rest")
	pol := fs.String("policy", "", "the candidate policy: a directory of Rego (and data.json) or an OPA bundle archive (.tar.gz)")
	label := fs.String("policy-version", "candidate", "the label the candidate's decisions cite as their policy version")
	since := fs.String("since", "", "evaluate steps recorded at or after T (RFC 3339)")
	until := fs.String("until", "", "evaluate steps recorded before T (RFC 3339)")
	agent := fs.String("agent", "", "evaluate steps of agents whose id starts with PREFIX")
	session := fs.String("session", "", "evaluate the steps of one session")
	tool := fs.String("tool", "", "evaluate calls of one tool")
	decision := fs.String("decision", "", "evaluate steps recorded with this decision ("+strings.Join(whatif.Decisions, ", ")+")")
	source := fs.String("source", "", "evaluate records of one source ("+strings.Join(whatif.Sources, ", ")+")")
	limit := fs.Int64("limit", 0, fmt.Sprintf("evaluate at most N steps (at most %d)", whatif.DefaultMaxSteps))
	asJSON := fs.Bool("json", false, "write one JSON object per changed step, then the summary")
	setUsage(fs, stderr, "usage: acsledger whatif --policy DIR|BUNDLE.tar.gz [--policy-version LABEL] [--since T] [--until T] [--agent PREFIX] [--session ID] [--tool NAME] [--decision D] [--source S] [--limit N] [--json] [--db URL|DIR]")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: unexpected arguments %q (flags only)", errUsage, fs.Args())
	}
	if *pol == "" {
		return fmt.Errorf("%w: --policy is required", errUsage)
	}
	filter := ledger.StepFilter{AgentPrefix: *agent, SessionID: *session, ToolName: *tool, Disposition: *decision, Source: *source}
	for name, v := range map[string]struct {
		s string
		t *time.Time
	}{"--since": {*since, &filter.Since}, "--until": {*until, &filter.Until}} {
		if v.s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v.s)
		if err != nil {
			return fmt.Errorf("%w: %s %q is not an RFC 3339 time", errUsage, name, v.s)
		}
		*v.t = t
	}
	b, err := whatif.LoadBundle(*pol, strings.TrimSuffix(filepath.Base(*pol), ".tar.gz"), *label)
	if err != nil {
		return fmt.Errorf("%w: --policy %s: %w", errUsage, *pol, err)
	}
	c, err := whatif.NewCandidate(ctx, b, *source != "opa")
	if err != nil {
		return fmt.Errorf("%w: --policy %s: %w", errUsage, *pol, err)
	}

	store, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer store.Close()

	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	var changes []whatif.Change
	run := whatif.Options{Filter: filter, Limit: *limit}
	showProgress := term.Is(stderr)
	if showProgress {
		start := time.Now()
		run.Progress = func(p whatif.Progress) {
			rate := float64(p.Read) / time.Since(start).Seconds()
			fmt.Fprintf(stderr, "\r%d steps read (%.0f/s), %d evaluated, %d changed, %d not replayable, at %s ",
				p.Read, rate, p.Evaluated, p.Changed, p.NotReplayable, p.At.Format(time.RFC3339))
		}
	}
	sum, err := whatif.Run(ctx, store, c, run, func(ch whatif.Change) error {
		if *asJSON {
			return enc.Encode(ch)
		}
		if len(changes) < 1000 {
			changes = append(changes, ch)
		}
		return nil
	})
	if showProgress {
		fmt.Fprintln(stderr)
	}
	if errors.Is(err, whatif.ErrBadRun) {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		if err := enc.Encode(sum); err != nil {
			return err
		}
	} else {
		printWhatIf(stdout, sum, changes)
	}
	if sum.Changed > 0 {
		return errWhatIfChanged
	}
	return nil
}

// printWhatIf writes a run's report for a person.
func printWhatIf(w io.Writer, sum *whatif.Summary, changes []whatif.Change) {
	fmt.Fprintf(w, "candidate %s (sha256 %s)\n", sum.Candidate, sum.CandidateDigest)
	fmt.Fprintf(w, "%d steps read: %d evaluated, %d unchanged, %d changed; %d not policy decisions; %d not replayable; %d approximate\n",
		sum.Read, sum.Evaluated, sum.Unchanged, sum.Changed, sum.NotPolicy, sum.NotReplayable, sum.Approximate)
	if sum.Truncated {
		fmt.Fprintln(w, "stopped at --limit: more steps match")
	}
	printCounts(w, "changed by kind", sum.ByKind)
	if len(sum.Rules) > 0 {
		fmt.Fprintln(w, "rules firing differently (steps where only the candidate / only the recorded decision fired it):")
		for _, r := range sum.Rules {
			fmt.Fprintf(w, "  %-40s +%d -%d\n", r.Rule, r.Gained, r.Lost)
		}
	}
	printCounts(w, "not replayable", sum.NotReplayableByKind)
	for _, s := range sum.NotReplayableSteps {
		fmt.Fprintf(w, "  session %s position %d (%s): %s\n", s.SessionID, s.Position, s.StepID, s.Reason)
	}
	printCounts(w, "approximate", sum.ApproximateByKind)
	if len(changes) > 0 {
		fmt.Fprintln(w, "changed steps:")
		for _, c := range changes {
			what := c.Method
			if c.Tool != "" {
				what += " " + c.Tool
			}
			fmt.Fprintf(w, "  %s session %s position %d %s: %s [%s] -> %s [%s]\n", c.RecordedAt.Format(time.RFC3339), c.SessionID, c.Position, what,
				c.Recorded.Decision, strings.Join(c.Recorded.Rules, " "), c.Candidate.Decision, strings.Join(c.Candidate.Rules, " "))
		}
		if int64(len(changes)) < sum.Changed {
			fmt.Fprintf(w, "  ... and %d more (--json lists every one)\n", sum.Changed-int64(len(changes)))
		}
	}
}

func printCounts(w io.Writer, title string, m map[string]int64) {
	if len(m) == 0 {
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "%s:\n", title)
	for _, k := range keys {
		fmt.Fprintf(w, "  %-24s %d\n", k, m[k])
	}
}
