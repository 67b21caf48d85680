package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/web"
	"github.com/acsledger/acsledger/web/access"
)

// runToken is `acsledger token create|list|revoke`: API tokens, stored as
// SHA-256 hashes in the store (docs/operations.md).
func runToken(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runSubcommand(ctx, "token", []command{
		{name: "create", run: tokenCreate},
		{name: "list", run: tokenList},
		{name: "revoke", run: tokenRevoke},
	}, args, stdout, stderr)
}

// openTokens opens the store named by db and its token storage.
func openTokens(ctx context.Context, db dbFlags) (web.Tokens, func() error, error) {
	st, err := openStore(ctx, db, ledger.Options{})
	if err != nil {
		return nil, nil, err
	}
	return st, st.Close, nil
}

// parseExpiry reads a duration, in Go's syntax (720h) or in days (30d).
func parseExpiry(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%w: --expires %q: want a positive number of days (30d) or a duration (720h)", errUsage, s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%w: --expires %q: want a positive duration (720h) or number of days (30d)", errUsage, s)
	}
	return d, nil
}

// tokenCreate prints the new token alone on stdout, the only time it is
// shown; what it is goes to stderr.
func tokenCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, db := adminFlagSet("token create", stderr)
	role := fs.String("role", "", "admin, writer, auditor, viewer or metrics (required)")
	name := fs.String("name", "", "a unique name, shown in token list and the access log (default: ROLE-<8 hex digits>)")
	scope := fs.String("scope", "", "limit the token to sessions whose agent id starts with this prefix")
	expires := fs.String("expires", "", "lifetime: a duration (720h) or days (30d); default: never expires")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if !web.ValidRole(*role) {
		return fmt.Errorf("%w: --role %q: want admin, writer, auditor, viewer or metrics", errUsage, *role)
	}
	ttl, err := parseExpiry(*expires)
	if err != nil {
		return err
	}
	ts, closeStore, err := openTokens(ctx, *db)
	if err != nil {
		return err
	}
	defer closeStore()
	token, t, err := web.CreateToken(ctx, ts, web.TokenRequest{Name: *name, Role: web.Role(*role), Scope: *scope, ExpiresIn: ttl}, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, token)
	fmt.Fprintf(stderr, "created token %q (role %s%s%s); it is not stored and will not be shown again\n", t.Name, t.Role, describeScope(t.Scope), describeExpiry(t.ExpiresAt))
	return nil
}

func describeScope(s string) string {
	if s == "" {
		return ""
	}
	return fmt.Sprintf(", agent ids starting with %q", s)
}

func describeExpiry(t time.Time) string {
	if t.IsZero() {
		return ", no expiry"
	}
	return ", expires " + t.Format(time.RFC3339)
}

func tokenList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, db := adminFlagSet("token list", stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ts, closeStore, err := openTokens(ctx, *db)
	if err != nil {
		return err
	}
	defer closeStore()
	list, err := ts.Tokens(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	if *asJSON {
		type tokenOut struct {
			access.TokenJSON
			State string `json:"state"`
		}
		out := []tokenOut{}
		for _, t := range list {
			out = append(out, tokenOut{access.NewTokenJSON(t), tokenState(t, now)})
		}
		return printJSON(stdout, out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tSCOPE\tCREATED\tEXPIRES\tSTATE")
	for _, t := range list {
		exp := "never"
		if !t.ExpiresAt.IsZero() {
			exp = t.ExpiresAt.Format(time.RFC3339)
		}
		scope := t.Scope
		if scope == "" {
			scope = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.Role, scope, t.CreatedAt.Format(time.RFC3339), exp, tokenState(t, now))
	}
	return tw.Flush()
}

func tokenState(t ledger.Token, now time.Time) string {
	switch {
	case !t.RevokedAt.IsZero():
		return "revoked " + t.RevokedAt.Format(time.RFC3339)
	case !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt):
		return "expired"
	}
	return "active"
}

func tokenRevoke(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, db := adminFlagSet("token revoke", stderr)
	// NAME may come before or after the flags.
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	var name string
	if rest := fs.Args(); len(rest) > 0 {
		name = rest[0]
		if err := fs.Parse(rest[1:]); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	if name == "" || fs.NArg() != 0 {
		return fmt.Errorf("%w: token revoke takes one token NAME", errUsage)
	}
	ts, closeStore, err := openTokens(ctx, *db)
	if err != nil {
		return err
	}
	defer closeStore()
	if err := ts.RevokeToken(ctx, name, time.Now().UTC().Truncate(time.Microsecond)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "revoked %s\n", name)
	return nil
}
