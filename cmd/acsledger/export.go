package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/acsledger/acsledger/internal/keydir"
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
	var db dbFlags
	db.register(fs, "store URL (default: embedded store in ./"+storeopen.DefaultDir+")")
	keysDir := fs.String("keys", "", "key directory, as for serve: the bundle carries its public response keys and is anchored with its Merkle log keys ("+logKeyFile+"); default: keys/ beside the embedded store or ./acsledger-keys")
	includePolicies := fs.Bool("include-policies", false, "put the policy bundles' content in the bundle, not only their digests")
	includeParams := fs.Bool("params", false, "put each step's request params in the bundle, so that acsverify checks them against request_hash (they hold what the Guardian redacted: share such a bundle as you would the params)")
	masterKey := fs.String("master-key-file", "", "FILE holding the master key of payloads at rest (default $"+keydir.EnvMasterKey+", else "+keydir.MasterKeyFile+" in --keys)")
	sinceSize := fs.Uint64("since-size", 0, "also carry the checkpoint of this tree size (an earlier bundle's) and a consistency proof from it, for acsverify bundle --since")
	policyFile := fs.String("witness-policy", "", "the witness policy `FILE` serve runs with: the bundle is anchored in the latest checkpoint it published, and carries its witnesses")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *session == "" {
		return fmt.Errorf("%w: --session is required", errUsage)
	}
	dir := db.keysDir(*keysDir)
	// The bundle carries source records (and with --params the params),
	// which are sealed at rest with serve's master key.
	store, err := openSealedStore(ctx, db, *masterKey, dir)
	if err != nil {
		return err
	}
	defer store.Close()

	opts := evidence.Options{IncludePolicies: *includePolicies, IncludeParams: *includeParams, SinceSize: *sinceSize}
	if opts.ResponseKeys, err = keydir.PublicKeys(dir); err != nil {
		return err
	}
	var policy *tlog.WitnessPolicy
	if *policyFile != "" {
		b, err := os.ReadFile(*policyFile)
		if err != nil {
			return fmt.Errorf("couldn't read --witness-policy: %w", err)
		}
		if policy, err = tlog.ParseWitnessPolicy(b); err != nil {
			return fmt.Errorf("--witness-policy %s: %w", *policyFile, err)
		}
		opts.Witnesses, opts.WitnessQuorum = policy.VerifierKeys(), policy.MinWitnesses()
	}
	var log evidence.Log
	l, err := openLogReadOnly(ctx, store, dir, policy)
	if err != nil {
		return err
	}
	if l != nil {
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
		fmt.Fprintf(stderr, "; NOT anchored: no Merkle log key in %s, so verifiers report not_anchored\n", dir)
	default:
		fmt.Fprintf(stderr, "; NOT anchored: no checkpoint covers the session yet, so verifiers report not_anchored\n")
	}
	return nil
}

// exportFile writes the bundle to a temporary file beside path and renames
// it into place, so that a failed export leaves no partial bundle.
func exportFile(ctx context.Context, store evidence.Store, log evidence.Log, session, path string, opts evidence.Options) (evidence.Summary, error) {
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

// openStore opens the store the flags name.
func openStore(ctx context.Context, db dbFlags, opts ledger.Options) (storeopen.Store, error) {
	url, err := db.url()
	if err != nil {
		return nil, err
	}
	st, err := storeopen.Open(ctx, url, opts)
	if err != nil {
		return nil, fmt.Errorf("couldn't open store %s: %w", redact(url), err)
	}
	return st, nil
}

// openSealedStore opens the store the flags name with the master key of
// payloads at rest (masterKey, else $ACSLEDGER_MASTER_KEY, else the one in
// the key directory dir), which seals request params and source records
// as serve does; with none, payloads are stored and read in clear.
func openSealedStore(ctx context.Context, db dbFlags, masterKey, dir string) (storeopen.Store, error) {
	sealer, err := keydir.ParamsSealer(masterKey, dir, false, nil)
	if err != nil {
		return nil, err
	}
	opts := ledger.Options{}
	if sealer != nil {
		opts.Params = sealer
	}
	return openStore(ctx, db, opts)
}

// openLogReadOnly opens the Merkle log over store with the log keys serve
// keeps in dir, or returns nil when dir holds none. Unlike serve it never
// generates a key. Opening may sign a checkpoint for leaves integrated
// after the last one, as the log does after a crash; it integrates nothing.
//
// With policy the log publishes only what the stored cosignatures satisfy
// it for, as serve --witness-policy does.
func openLogReadOnly(ctx context.Context, store storeopen.Store, dir string, policy *tlog.WitnessPolicy) (*tlog.Log, error) {
	var keys []string
	for _, name := range []string{logKeyFile, logMLDSAKeyFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			if name == logKeyFile {
				return nil, nil
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("couldn't read the log key: %w", err)
		}
		keys = append(keys, strings.TrimSpace(string(b)))
	}
	l, err := tlog.New(ctx, store.LogStorage(), tlog.Config{Origin: keyName(keys[0]), Keys: keys, WitnessPolicy: policy})
	if err != nil {
		return nil, fmt.Errorf("couldn't open the Merkle log with the keys in %s: %w", dir, err)
	}
	return l, nil
}
