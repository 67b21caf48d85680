package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/acsledger/acsledger/ledger"
)

// runErase erases the request params stored beside one step
// (docs/storage.md, "Request params"; docs/operations.md, "Erasing request
// params"), or with --source the source record stored beside an ingested
// entry (docs/ingest.md). The entry, with its request_hash or
// source_sha256, and the signed response stay, so the chain and its proofs
// still verify; the erasure is recorded.
func runErase(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("erase", stderr)
	var db dbFlags
	db.register(fs, "store URL (required): PostgreSQL as a role that is a member of acsledger_eraser and acsledger_writer (the owner that runs migrate is), or sqlite:DIR")
	session := fs.String("session", "", "the step's session (required)")
	position := fs.Int64("position", -1, "the step's position in its session, from 0 (required)")
	reason := fs.String("reason", "", "why the payload is erased, recorded with the erasure (required)")
	source := fs.Bool("source", false, "erase the source record of an ingested entry instead of a step's request params")
	by := fs.String("by", "", "who asked for the erasure, recorded with it (default: the OS user name)")
	agent := fs.String("agent", "", "erase by subject: every payload of agents whose id starts with this prefix (with --until; instead of --session and --position)")
	until := fs.String("until", "", "with --agent: of entries recorded before this time (RFC 3339 or a date)")
	setUsage(fs, stderr, "usage: acsledger erase --db URL --session ID --position N --reason TEXT [--by NAME] [--source]\n       acsledger erase --db URL --agent PREFIX --until TIME --reason TEXT [--by NAME]")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case db.named() == "":
		// Never the default store: an erasure cannot be undone, so the
		// store is named.
		return fmt.Errorf("%w: --db is required", errUsage)
	case *agent != "" && (*session != "" || *position >= 0):
		return fmt.Errorf("%w: --agent erases by subject; give it without --session and --position", errUsage)
	case *agent != "" && strings.TrimSpace(*reason) == "":
		return fmt.Errorf("%w: --reason is required and must not be blank", errUsage)
	case *agent != "":
		return eraseSubject(ctx, db, *agent, *until, *reason, *by, stdout)
	case *until != "":
		return fmt.Errorf("%w: --until goes with --agent", errUsage)
	case *session == "":
		return fmt.Errorf("%w: --session is required", errUsage)
	case *position < 0:
		return fmt.Errorf("%w: --position is required (a position from 0)", errUsage)
	case strings.TrimSpace(*reason) == "":
		return fmt.Errorf("%w: --reason is required and must not be blank", errUsage)
	}
	erasedBy := whoami(*by)
	store, err := openStore(ctx, db, ledger.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	if *source {
		e, err := store.EraseSource(ctx, *session, *position, *reason, erasedBy)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "erased the source record of session %s position %d at %s (by %q, reason %q)\n",
			e.SessionID, e.Position, e.ErasedAt.Format(time.RFC3339Nano), e.ErasedBy, e.Reason)
		fmt.Fprintln(stdout, "the entry (with its source_sha256) is kept; the chain still verifies")
		return nil
	}
	e, err := store.EraseParams(ctx, *session, *position, *reason, erasedBy)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "erased the request params of session %s position %d at %s (by %q, reason %q)\n",
		e.SessionID, e.Position, e.ErasedAt.Format(time.RFC3339Nano), e.ErasedBy, e.Reason)
	fmt.Fprintln(stdout, "the entry (with its request_hash) and the signed response are kept; the chain still verifies")
	return nil
}
