package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/acsledger/acsledger/ingest"
	"github.com/acsledger/acsledger/internal/ingestfiles"
	"github.com/acsledger/acsledger/internal/keydir"
	"github.com/acsledger/acsledger/ledger/storeopen"
	"github.com/acsledger/acsledger/web"
)

// inputError is unreadable input or bad flags: exit status 2, with its
// own message.
type inputError struct{ err error }

func (e *inputError) Error() string        { return e.err.Error() }
func (e *inputError) Is(target error) bool { return target == errUsage }

// ingestFlags are the source flags of `acsledger ingest`.
type ingestFlags struct {
	format    string
	db        dbFlags
	keys      string
	masterKey string
	json      bool
	batch     int
	noAnchor  bool
	src       ingestfiles.Sources
}

func (f *ingestFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.format, "format", "", "source format: opa, bash-guard, bash-guard-audit, a2h or acs (required)")
	f.db.register(fs, "store URL (default: embedded store in ./"+storeopen.DefaultDir+")")
	fs.StringVar(&f.keys, "keys", "", "key directory, as for serve: its Merkle log key anchors what was ingested (default: keys/ beside the embedded store or ./acsledger-keys)")
	fs.StringVar(&f.masterKey, "master-key-file", "", "FILE holding the master key (64 hex digits) that seals source records at rest, as serve seals request params; default $"+keydir.EnvMasterKey+", else "+keydir.MasterKeyFile+" in --keys (without one, source records are stored in clear)")
	fs.BoolVar(&f.noAnchor, "no-anchor", false, "leave the new entries for the running server's log to anchor")
	fs.BoolVar(&f.json, "json", false, "print one JSON object per record, then a summary object")
	fs.IntVar(&f.batch, "batch", ingest.DefaultBatch, "records per transaction")
	f.registerPush(fs)
	fs.Func("a2h-type", "a2h: the type of an A2H message, `MESSAGE_ID=ask|task|notify` (repeatable)", f.src.AddA2HType)
	fs.Func("acs-keys", "acs: the other Guardian's response keys, a key directory or a .pub.json file (repeatable)", f.src.AddACSKeys)
	fs.Func("acs-hmac", "acs: the other Guardian's HMAC-SHA256 IKM, `KEY_ID=HEX` (repeatable)", f.src.AddACSHMAC)
}

// registerPush registers the flags of the sources that also arrive over
// HTTP (serve takes them too).
func (f *ingestFlags) registerPush(fs *flag.FlagSet) {
	fs.StringVar(&f.src.OPASessionPath, "opa-session-path", ingest.DefaultOPASessionPath, "opa: dotted path of the session id in a decision event")
	fs.Func("opa-subject-path", "opa: dotted `PATH` in a decision's input or labels (input.user, labels.NAME) whose string is the entry's subject (its session's agent id, which erase --agent matches); default: none", f.src.SetOPASubjectPath)
	fs.Func("a2h-hmac", "a2h: a Hub's HMAC-SHA256 secret, `KEY_ID=HEX` (repeatable)", f.src.AddA2HHMAC)
	fs.Func("a2h-ed25519", "a2h: a Hub's raw 32-byte Ed25519 public key, `KEY_ID=HEX` (repeatable)", f.src.AddA2HEd25519)
	fs.DurationVar(&f.src.A2HWindow, "a2h-window", ingest.DefaultA2HWindow, "a2h: replay window around received_at")
}

// runIngest takes in records other systems wrote (docs/ingest.md).
func runIngest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("ingest", stderr)
	var f ingestFlags
	f.register(fs)
	setUsage(fs, stderr, "usage: acsledger ingest --format opa|bash-guard|bash-guard-audit|a2h|acs [--db URL|DIR] [--json] [source flags] FILE...")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &inputError{err}
	}
	files := fs.Args()
	if len(files) == 0 {
		return &inputError{errors.New("no input files")}
	}
	if f.batch <= 0 {
		return &inputError{errors.New("--batch must be positive")}
	}
	if _, err := f.src.Mapper(f.format, nil); err != nil {
		return &inputError{err}
	}
	// Every file must open before anything is written.
	opened, err := ingestfiles.Open(files)
	if err != nil {
		return &inputError{err}
	}
	defer ingestfiles.Close(opened)

	// Source records are kept beside their entries sealed with serve's
	// master key, when there is one (docs/ingest.md).
	st, err := openSealedStore(ctx, f.db, f.masterKey, f.db.keysDir(f.keys))
	if err != nil {
		return err
	}
	defer st.Close()
	var store ingest.Store = st
	m, err := f.src.Mapper(f.format, store)
	if err != nil {
		return &inputError{err}
	}

	total, unreadable, err := ingestfiles.Run(ctx, store, m, files, opened, ingestfiles.Options{Format: ingest.Format(f.format), Batch: f.batch, JSON: f.json}, stdout, stderr)
	if err != nil {
		return err
	}
	if !f.noAnchor && total.Accepted > 0 {
		if err := anchorIngested(ctx, st, f, stderr); err != nil {
			return err
		}
	}
	switch {
	case len(unreadable) > 0:
		return &inputError{errors.Join(unreadable...)}
	case total.Quarantined > 0:
		return fmt.Errorf("%d records quarantined", total.Quarantined)
	}
	return nil
}

// anchorIngested integrates the new entries into the Merkle log when the
// key directory holds its key, as a running server would.
func anchorIngested(ctx context.Context, st storeopen.Store, f ingestFlags, stderr io.Writer) error {
	dir := f.db.keysDir(f.keys)
	l, err := openLogReadOnly(ctx, st, dir, nil)
	if err != nil {
		return err
	}
	if l == nil {
		fmt.Fprintf(stderr, "not anchored: no Merkle log key in %s; a running server anchors the new entries\n", dir)
		return nil
	}
	total := 0
	for {
		n, err := l.Integrate(ctx)
		if err != nil {
			return fmt.Errorf("couldn't anchor the ingested entries (a running server will): %w", err)
		}
		if n == 0 {
			break
		}
		total += n
	}
	fmt.Fprintf(stderr, "anchored %d entries in the Merkle log\n", total)
	return nil
}

// ingestServeFlags configure serve's ingest routes (docs/ingest.md).
type ingestServeFlags struct {
	f           ingestFlags
	callbackURL string
	maxInFlight int
}

func (s *ingestServeFlags) register(fs *flag.FlagSet) {
	s.f.registerPush(fs)
	fs.StringVar(&s.callbackURL, "a2h-callback-url", "", "the URL Hubs push A2H Responses to, as they sign it (default: rebuilt from each request)")
	fs.IntVar(&s.maxInFlight, "ingest-max-in-flight", 2, "ingest requests handled at once; more get 429 with Retry-After")
}

func (s *ingestServeFlags) options() web.IngestOptions {
	return web.IngestOptions{
		OPASessionPath: s.f.src.OPASessionPath, OPASubjectPath: s.f.src.OPASubjectPath, A2HKeys: s.f.src.A2HKeys, A2HWindow: s.f.src.A2HWindow,
		A2HCallbackURL: s.callbackURL, MaxInFlight: s.maxInFlight,
	}
}
