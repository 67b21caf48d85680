package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/ledger/storeopen"
	"github.com/acsledger/acsledger/ledger/tlog"
)

// runExport writes a session's evidence bundle (docs/evidence-bundle.md).
func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("export", stderr)
	session := fs.String("session", "", "the session to export (required)")
	out := fs.String("out", "", "write the bundle to FILE (written whole or not at all); default stdout")
	db := fs.String("db", "", "store URL (default: embedded store in ./"+storeopen.DefaultDir+")")
	keysDir := fs.String("keys", "", "key directory whose public response keys the bundle carries (default: keys/ beside the embedded store or ./acsledger-keys, if it exists)")
	logKey := fs.String("log-key", "", "file of the Merkle log's signer keys, one per line (Ed25519 first); without it the bundle is not anchored")
	includePolicies := fs.Bool("include-policies", false, "put the policy bundles' content in the bundle, not only their digests")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *session == "" {
		return fmt.Errorf("%w: --session is required", errUsage)
	}
	store, err := openGuardianStore(ctx, *db)
	if err != nil {
		return err
	}
	defer store.Close()

	opts := evidence.Options{IncludePolicies: *includePolicies}
	if opts.ResponseKeys, err = publicKeys(*keysDir, *db); err != nil {
		return err
	}
	var log evidence.Log
	if *logKey != "" {
		l, closeLog, err := openLog(ctx, *db, *logKey)
		if err != nil {
			return err
		}
		defer closeLog()
		log = l
	}

	var sum evidence.Summary
	if *out == "" {
		bw := bufio.NewWriter(stdout)
		if sum, err = evidence.Build(ctx, store, log, *session, bw, opts); err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
	} else if sum, err = exportFile(ctx, store, log, *session, *out, opts); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "exported session %s: %d entries, %d signed responses", *session, sum.Entries, sum.Responses)
	switch {
	case sum.Anchored:
		fmt.Fprintf(stderr, ", anchored through entry %d in the checkpoint of size %d\n", sum.AnchoredThrough-1, sum.TreeSize)
	case log == nil:
		fmt.Fprintf(stderr, "; NOT anchored: no --log-key given, so verifiers report not_anchored\n")
	default:
		fmt.Fprintf(stderr, "; NOT anchored: no checkpoint covers the session yet, so verifiers report not_anchored\n")
	}
	return nil
}

// exportFile writes the bundle to a temporary file beside path and renames
// it into place, so that a failed export leaves no partial bundle.
func exportFile(ctx context.Context, store ledger.GuardianStore, log evidence.Log, session, path string, opts evidence.Options) (evidence.Summary, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".export-*.json")
	if err != nil {
		return evidence.Summary{}, fmt.Errorf("couldn't create %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	sum, err := evidence.Build(ctx, store, log, session, tmp, opts)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return sum, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return sum, fmt.Errorf("couldn't write %s: %w", path, err)
	}
	return sum, nil
}

// openGuardianStore opens the store at url, which must keep signed
// responses and policy bundles (both implementations do).
func openGuardianStore(ctx context.Context, url string) (ledger.GuardianStore, error) {
	st, err := storeopen.Open(ctx, url, ledger.Options{})
	if err != nil {
		return nil, fmt.Errorf("couldn't open store %s: %w", redact(url), err)
	}
	gs, ok := st.(ledger.GuardianStore)
	if !ok {
		st.Close()
		return nil, fmt.Errorf("store %s keeps no signed responses", redact(url))
	}
	return gs, nil
}

// publicKeys loads the public halves of the keys in dir (or in the default
// key directory, if it exists). HMAC keys are left to the bundle builder,
// which never carries them.
func publicKeys(dir, storeURL string) ([]*sig.PublicKey, error) {
	if dir == "" {
		dir = defaultKeysDir(storeURL)
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
	}
	kd, err := sig.LoadKeyDir(dir)
	if err != nil {
		return nil, fmt.Errorf("couldn't load keys from %s: %w", dir, err)
	}
	var out []*sig.PublicKey
	for _, id := range kd.KeySet.KeyIDs() {
		k, _ := kd.KeySet.Get(id)
		out = append(out, k)
	}
	return out, nil
}

// openLog opens the Merkle log over the store at url with the signer keys
// in keyFile (one per line, the Ed25519 key named after the origin first).
// Opening it may sign a checkpoint for leaves integrated after the last
// one, as the log does after a crash; it integrates nothing.
func openLog(ctx context.Context, url, keyFile string) (*tlog.Log, func(), error) {
	b, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("couldn't read --log-key: %w", err)
	}
	var keys []string
	for line := range strings.Lines(string(b)) {
		if line = strings.TrimSpace(line); line != "" {
			keys = append(keys, line)
		}
	}
	if len(keys) == 0 {
		return nil, nil, fmt.Errorf("%w: --log-key %s holds no key", errUsage, keyFile)
	}
	// PRIVATE+KEY+<name>+<id>+<key>: the first key's name is the origin.
	parts := strings.Split(keys[0], "+")
	if len(parts) != 5 || parts[0] != "PRIVATE" || parts[1] != "KEY" {
		return nil, nil, fmt.Errorf("%w: --log-key %s line 1 is not a signer key (PRIVATE+KEY+<name>+<id>+<key>)", errUsage, keyFile)
	}
	t, err := storeopen.Parse(url)
	if err != nil {
		return nil, nil, err
	}
	var storage tlog.Storage
	var closeFn func()
	if t.Postgres != "" {
		pool, err := pgxpool.New(ctx, t.Postgres)
		if err != nil {
			return nil, nil, fmt.Errorf("couldn't connect to %s: %w", redact(url), err)
		}
		storage, closeFn = tlog.NewPGStorage(pool), pool.Close
	} else {
		path := filepath.Join(t.Dir, storeopen.SQLiteFile)
		db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
		if err != nil {
			return nil, nil, fmt.Errorf("couldn't open %s: %w", path, err)
		}
		db.SetMaxOpenConns(1)
		storage, closeFn = tlog.NewSQLiteStorage(db, db), func() { db.Close() }
	}
	l, err := tlog.New(ctx, storage, tlog.Config{Origin: parts[2], Keys: keys})
	if err != nil {
		closeFn()
		return nil, nil, fmt.Errorf("couldn't open the Merkle log: %w", err)
	}
	return l, closeFn, nil
}
