package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/ledger/storeopen"
	"github.com/acsledger/acsledger/web/api"
)

// runReceipt writes one entry's receipt (docs/receipts.md), in the
// c2sp.org/tlog-proof form or, with --format cose, the COSE form.
func runReceipt(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("receipt", stderr)
	session := fs.String("session", "", "the entry's session (required)")
	position := fs.Int64("position", -1, "the entry's 0-based position in the session's chain (required)")
	format := fs.String("format", "tlog-proof", "tlog-proof (c2sp.org/tlog-proof text) or cose (a COSE_Sign1 transparent statement with an RFC 9942 receipt, binary)")
	out := fs.String("out", "", "write the receipt to FILE (written whole or not at all); default stdout")
	var db dbFlags
	db.register(fs, "store URL (default: embedded store in ./"+storeopen.DefaultDir+")")
	keysDir := fs.String("keys", "", "key directory, as for serve (the Merkle log's keys, "+logKeyFile+"); default: keys/ beside the embedded store or ./acsledger-keys")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *session == "" || *position < 0 {
		return fmt.Errorf("%w: --session and --position (0 or more) are required", errUsage)
	}
	build := evidence.Receipt
	switch *format {
	case "tlog-proof":
	case "cose":
		build = evidence.COSEReceipt
	default:
		return fmt.Errorf("%w: --format %q is neither tlog-proof nor cose", errUsage, *format)
	}
	store, err := openStore(ctx, db, ledger.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	l, err := openLogReadOnly(ctx, store, db.keysDir(*keysDir), nil)
	if err != nil {
		return err
	}
	var rl evidence.ReceiptLog
	if l != nil {
		rl = l
	}
	doc, err := build(ctx, store, rl, *session, *position)
	if errors.Is(err, evidence.ErrNotAnchored) && l != nil {
		return fmt.Errorf("%w; retry in %d s, once `acsledger serve` has integrated and signed it", err, api.RetryAfter(l))
	}
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = stdout.Write(doc)
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(*out), ".receipt-*.tlog-proof")
	if err != nil {
		return fmt.Errorf("couldn't create %s: %w", *out, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(doc)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), *out)
	}
	if err != nil {
		return fmt.Errorf("couldn't write %s: %w", *out, err)
	}
	fmt.Fprintf(stderr, "wrote the receipt of session %s position %d to %s\n", *session, *position, *out)
	return nil
}
