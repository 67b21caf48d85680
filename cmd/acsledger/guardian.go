package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/guardian/opapolicy"
	"github.com/acsledger/acsledger/guardian/policy"
	"github.com/acsledger/acsledger/internal/keydir"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/paramcrypt"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

// guardianFlags are the Guardian's settings, shared by serve and guardian.
type guardianFlags struct {
	keysDir       string
	hmacKeys      []string
	responseKeyID string
	policyDir     string
	policyID      string
	policyVersion string
	approverKeys  string
	// onFailure is the failure posture (guardian.Config.OnDecisionFailure).
	onFailure     string
	masterKeyFile string
	// acsTrace emits ACS-Trace step spans and acs.decision events
	// (guardian.Config.TraceSteps).
	acsTrace bool
}

// envACSTrace turns --acs-trace on by default when set to a true value.
const envACSTrace = "ACSLEDGER_ACS_TRACE"

func (f *guardianFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.keysDir, "keys", "", "key directory (acsledger keygen); default: keys/ beside the embedded store, or ./acsledger-keys, created with fresh keys if missing")
	fs.Func("hmac-key", "add an HMAC-SHA256 input key `KEY_ID=HEX_IKM` (repeatable)", func(v string) error {
		f.hmacKeys = append(f.hmacKeys, v)
		return nil
	})
	fs.StringVar(&f.responseKeyID, "response-key", "", "key_id of the asymmetric key that signs non-HMAC responses (default: the only one in --keys)")
	fs.StringVar(&f.policyDir, "policy", "", "directory of a Rego policy bundle (default: the shipped baseline); SIGHUP reloads it")
	fs.StringVar(&f.approverKeys, "approver-keys", "", "directory of approvers' public keys (key_id = approver id); enables POST /acs/approvals for ASK grants")
	fs.StringVar(&f.policyID, "policy-id", "local", "policy_id of the --policy bundle")
	fs.StringVar(&f.policyVersion, "policy-version", "", "policy_version of the --policy bundle (required with --policy)")
	f.onFailure = guardian.PostureDeny
	fs.Func("on-ledger-failure", "what the Guardian answers when the ledger or the policy fails: `deny` (default: a signed DENY, fail closed) or proceed (a signed -32603 error; the agent applies its own posture); advertised as on_decision_failure", func(v string) error {
		if v != guardian.PostureDeny && v != guardian.PostureProceed {
			return fmt.Errorf("%q is not deny or proceed", v)
		}
		f.onFailure = v
		return nil
	})
	acsTrace, _ := strconv.ParseBool(os.Getenv(envACSTrace))
	fs.BoolVar(&f.acsTrace, "acs-trace", acsTrace, "emit ACS-Trace spans: one per step, named by the ACS OpenTelemetry mapping, with an acs.decision event (exported when OTEL_EXPORTER_OTLP_ENDPOINT is set); default $"+envACSTrace)
	fs.StringVar(&f.masterKeyFile, "master-key-file", "", "FILE holding the master key (64 hex digits) that encrypts request params at rest; default $"+keydir.EnvMasterKey+", else "+keydir.MasterKeyFile+" in the key directory, created if missing")
}

// sealer returns the sealer of request params at rest, creating the
// master key in the key directory if none is given.
func (f *guardianFlags) sealer(storeURL string, log *slog.Logger) (*paramcrypt.Sealer, error) {
	dir := f.keysDir
	if dir == "" {
		dir = defaultKeysDir(storeURL)
	} else if _, err := os.Stat(dir); err != nil {
		// As for the other keys: a directory named with --keys must
		// exist, so that a mistyped path is not a new identity.
		return nil, fmt.Errorf("couldn't read key directory %s: %w", dir, err)
	}
	return keydir.ParamsSealer(f.masterKeyFile, dir, true, log)
}

// loadKeys reads the key directory, creating it with default keys when it
// does not exist (keydir.Open), and adds the --hmac-key keys.
func (f *guardianFlags) loadKeys(storeURL string, log *slog.Logger) ([]*sig.PrivateKey, *sig.KeySet, error) {
	dir := f.keysDir
	if dir == "" {
		dir = defaultKeysDir(storeURL)
	}
	kd, err := keydir.Open(dir, f.keysDir == "", log)
	if err != nil {
		return nil, nil, err
	}
	keys := kd.Private
	for _, v := range f.hmacKeys {
		k, err := sig.ParseHMACKeyFlag(v)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: --hmac-key: %v", errUsage, err)
		}
		if err := kd.KeySet.Add(k.Public()); err != nil {
			return nil, nil, fmt.Errorf("%w: --hmac-key %s: %v", errUsage, k.KeyID(), err)
		}
		keys = append(keys, k)
	}
	return keys, kd.KeySet, nil
}

// bundle returns the policy bundle to decide with.
func (f *guardianFlags) bundle() (*policy.Bundle, error) {
	if f.policyDir == "" {
		return policy.Baseline(), nil
	}
	if f.policyVersion == "" {
		return nil, fmt.Errorf("%w: --policy needs --policy-version", errUsage)
	}
	b, err := policy.BundleFromFS(os.DirFS(f.policyDir), f.policyID, f.policyVersion)
	if err != nil {
		return nil, fmt.Errorf("couldn't read policy bundle %s: %w", f.policyDir, err)
	}
	return b, nil
}

// newGuardian builds the Guardian over store. With --policy, SIGHUP
// re-reads the bundle directory and loads it as a new version (the
// directory's policy_version must change with its content: the ledger
// refuses a second content under a recorded version).
//
// receipts serves the agent's copy of its receipts (guardian.MethodReceipt);
// nil without a Merkle log.
func (f *guardianFlags) newGuardian(ctx context.Context, store storeopen.Store, keys []*sig.PrivateKey, keySet *sig.KeySet, receipts guardian.ReceiptSource, log *slog.Logger) (*guardian.Guardian, error) {
	b, err := f.bundle()
	if err != nil {
		return nil, err
	}
	engine, err := policy.New(ctx, b, store, nil)
	if err != nil {
		return nil, fmt.Errorf("couldn't load policy %s %s: %w", b.ID, b.Version, err)
	}
	cfg := guardian.Config{Store: store, Policy: opapolicy.New(engine), Keys: keySet, Logger: log, OnDecisionFailure: f.onFailure, TraceSteps: f.acsTrace, Receipts: receipts}
	if f.approverKeys != "" {
		ak, err := sig.LoadKeyDir(f.approverKeys)
		if err != nil {
			return nil, fmt.Errorf("couldn't load approver keys from %s: %w", f.approverKeys, err)
		}
		cfg.ApproverKeys = ak.KeySet
		// With approvers configured, clients are taken to route ASK (§9.2);
		// the policy's data can still name agents that cannot.
		cfg.ApproverCapable = func(string) bool { return true }
		cfg.ApproverTypes = []string{"human", "agent", "service"}
	}
	if err := cfg.SetSigningKeys(keys, f.responseKeyID); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	g, err := guardian.New(cfg)
	if err != nil {
		return nil, err
	}
	ref := engine.Current()
	log.Info("guardian ready", "on_decision_failure", f.onFailure, "policy_id", ref.ID, "policy_version", ref.Version, "policy_digest", ref.Digest, "keys", strings.Join(keySet.KeyIDs(), ","))
	if f.policyDir != "" {
		go f.reloadOnHangup(ctx, engine, log)
	}
	return g, nil
}

func (f *guardianFlags) reloadOnHangup(ctx context.Context, engine *policy.Engine, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		b, err := f.bundle()
		if err == nil {
			err = engine.Load(ctx, b)
		}
		if err != nil {
			log.Error("policy reload refused; keeping the current version", "err", err)
			continue
		}
		ref := engine.Current()
		log.Info("policy reloaded", "policy_id", ref.ID, "policy_version", ref.Version, "policy_digest", ref.Digest)
	}
}

// runGuardian serves the Guardian over stdio (Content-Length framing).
func runGuardian(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("guardian", stderr)
	stdio := fs.Bool("stdio", false, "serve JSON-RPC on stdin/stdout with Content-Length framing (required)")
	var db dbFlags
	db.register(fs, "store URL, as for serve")
	var gf guardianFlags
	gf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if !*stdio {
		return fmt.Errorf("%w: only --stdio is supported; HTTP is served by 'acsledger serve' at POST /acs", errUsage)
	}
	log := newLogger(stderr)
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	url, err := db.url()
	if err != nil {
		return err
	}
	store, _, err := gf.openStore(ctx, url, ledger.Options{}, log)
	if err != nil {
		return err
	}
	defer store.Close()
	keys, keySet, err := gf.loadKeys(url, log)
	if err != nil {
		return err
	}
	// Spans and metrics leave over OTLP as from serve; stdout is the
	// protocol's, so nothing else is served.
	_, stopTelemetry, err := startTelemetry(ctx, log)
	if err != nil {
		return err
	}
	defer stopTelemetry()
	g, err := gf.newGuardian(ctx, store, keys, keySet, nil, log)
	if err != nil {
		return err
	}
	if err := g.ServeStdio(ctx, os.Stdin, stdout); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// runKeygen writes new keys into a directory: the Guardian keys of
// --alg and the Merkle log key.
func runKeygen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("keygen", stderr)
	dir := fs.String("dir", "", "directory to write the keys into (required; existing files are never overwritten)")
	algs := fs.String("alg", string(sig.ECDSAP256)+","+string(sig.HMACSHA256), "comma-separated ACS algorithms, e.g. ML-DSA-65,ECDSA-P256,HMAC-SHA256")
	prefix := fs.String("key-id-prefix", "acsledger", "key_ids are PREFIX-<algorithm in lower case>")
	var lf logFlags
	fs.StringVar(&lf.origin, "log-origin", "", "checkpoint origin line of the Merkle log key written beside the keys, as serve would make it (default HOSTNAME/acsledger)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		return fmt.Errorf("%w: --dir is required", errUsage)
	}
	var keys []*sig.PrivateKey
	for _, name := range strings.Split(*algs, ",") {
		alg, err := sig.ParseAlgorithm(strings.TrimSpace(name))
		if err != nil {
			return fmt.Errorf("%w: --alg: %v", errUsage, err)
		}
		k, err := sig.GenerateKey(alg, *prefix+"-"+strings.ToLower(string(alg)))
		if err != nil {
			return err
		}
		keys = append(keys, k)
	}
	if err := sig.WriteKeyDir(*dir, keys...); err != nil {
		return err
	}
	for _, k := range keys {
		fmt.Fprintf(stdout, "%s\t%s\n", k.KeyID(), k.Algorithm())
	}
	// The Merkle log key too, where serve would make it, so that an
	// offline ingest into a fresh store with these keys anchors what it
	// takes in.
	_, err := lf.loadLogKeys(*dir, newLogger(stderr))
	return err
}

// openStore opens the Guardian's store at url with opts and the sealer
// of request params at rest, and returns the options it opened it with.
// Like serve it never migrates a PostgreSQL database, and it creates
// nothing beside a store that cannot be reached.
func (f *guardianFlags) openStore(ctx context.Context, url string, opts ledger.Options, log *slog.Logger) (storeopen.Store, ledger.Options, error) {
	if err := storeopen.Reach(ctx, url); err != nil {
		return nil, opts, fmt.Errorf("couldn't open store %s: %w", redact(url), err)
	}
	sealer, err := f.sealer(url, log)
	if err != nil {
		return nil, opts, err
	}
	opts.Params = sealer
	store, err := storeopen.Open(ctx, url, opts)
	if err != nil {
		return nil, opts, fmt.Errorf("couldn't open store %s: %w", redact(url), err)
	}
	return store, opts, nil
}

// defaultKeysDir is where keys live when --keys is not given.
func defaultKeysDir(storeURL string) string { return keydir.Default(storeURL) }
