package main

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/ledger/storeopen"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/ledger/tlog/witness"
	"github.com/acsledger/acsledger/ledger/tsa"
	"github.com/acsledger/acsledger/verify"
	"github.com/acsledger/acsledger/web"
)

// Log key files in the key directory: one signed-note signer key each.
const (
	logKeyFile      = "log-ed25519.note.key"
	logMLDSAKeyFile = "log-mldsa44.note.key"
)

// logFlags configure the Merkle log that anchors every appended entry.
type logFlags struct {
	origin     string
	mldsa      bool
	witnesses  []tlog.WitnessConfig
	publishDir string
	quorum     int
	tsaURL     string
	tsaCert    string
	policyFile string
	policy     *tlog.WitnessPolicy
	// stamper, with --tsa, stamps every checkpoint the log signs; the
	// log's OnCheckpoint wakes it.
	stamper *tsa.Stamper
	tsaPEM  []string       // --tsa-cert's certificates, carried in bundles
	tsaPool *x509.CertPool // and trusted by the server's own checks
	mlog    *tlog.Log      // the opened log, for the stamper's lag gauge
}

func (f *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.origin, "log-origin", "", "checkpoint origin line used when the log key is first generated (default HOSTNAME/acsledger)")
	fs.BoolVar(&f.mldsa, "log-mldsa44", false, "also sign checkpoints with an ML-DSA-44 key (generated if missing)")
	fs.Func("witness", "ask a witness to cosign checkpoints: `URL=VERIFIER_KEY` (repeatable)", func(v string) error {
		url, vkey, ok := strings.Cut(v, "=")
		if !ok || url == "" || vkey == "" {
			return fmt.Errorf("want URL=VERIFIER_KEY, got %q", v)
		}
		f.witnesses = append(f.witnesses, tlog.WitnessConfig{URL: url, VerifierKey: vkey})
		return nil
	})
	fs.IntVar(&f.quorum, "witness-quorum", 1, "cosignatures a checkpoint needs to verify, when --witness is given (k of n)")
	fs.StringVar(&f.publishDir, "publish-dir", "", "write every checkpoint to this write-once directory (never overwriting a file)")
	fs.StringVar(&f.policyFile, "witness-policy", "", "witness policy `FILE` (Sigsum policy format: log, witness NAME KEY URL, group, quorum): a checkpoint is published only once its cosignatures satisfy the quorum")
	fs.StringVar(&f.tsaURL, "tsa", "", "RFC 3161 time-stamping authority `URL`: every signed checkpoint is stamped (a TSA that is down never stops the log)")
	fs.StringVar(&f.tsaCert, "tsa-cert", "", "PEM `FILE` of the TSA's certificate or its CA: responses that do not chain to it are refused")
}

// newStamper returns the time-stamper of --tsa over st, or nil without it.
func (f *logFlags) newStamper(st tlog.Storage, log *slog.Logger) (*tsa.Stamper, error) {
	if f.tsaURL == "" {
		if f.tsaCert != "" {
			return nil, fmt.Errorf("%w: --tsa-cert needs --tsa", errUsage)
		}
		return nil, nil
	}
	u, err := neturl.Parse(f.tsaURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: --tsa %q is not an http(s) URL", errUsage, f.tsaURL)
	}
	if u.User != nil {
		// The URL is logged; credentials do not belong in it.
		return nil, fmt.Errorf("%w: --tsa must not carry user information", errUsage)
	}
	if st.Timestamps == nil {
		return nil, errors.New("this store keeps no time-stamps")
	}
	var roots *x509.CertPool
	if f.tsaCert != "" {
		b, err := os.ReadFile(f.tsaCert)
		if err != nil {
			return nil, fmt.Errorf("couldn't read --tsa-cert: %w", err)
		}
		if roots, err = verify.ParseTSACerts(b); err != nil {
			return nil, fmt.Errorf("--tsa-cert %s: %w", f.tsaCert, err)
		}
		for rest := b; ; {
			var blk *pem.Block
			if blk, rest = pem.Decode(rest); blk == nil {
				break
			}
			f.tsaPEM = append(f.tsaPEM, string(pem.EncodeToMemory(blk)))
		}
		f.tsaPool = roots
	}
	return tsa.NewStamper(st.Timestamps, tsa.NewClient(f.tsaURL, roots, nil), tsa.StamperConfig{Logger: log, Latest: func(ctx context.Context) (uint64, error) {
		if f.mlog == nil {
			return 0, errors.New("the log is not open yet")
		}
		cp, err := f.mlog.LatestCheckpoint(ctx)
		return cp.Size, err
	}}), nil
}

func defaultOrigin() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return host + "/acsledger"
}

// loadLogKeys reads the log's signer keys from the key directory, generating
// the missing ones. The Ed25519 key's name is the log's origin, so the
// origin stays what it was when the key was made.
func (f *logFlags) loadLogKeys(dir string, log *slog.Logger) ([]string, error) {
	origin := f.origin
	if origin == "" {
		origin = defaultOrigin()
	}
	files := []struct {
		name string
		alg  tlog.Algorithm
	}{{logKeyFile, tlog.Ed25519}}
	if f.mldsa {
		files = append(files, struct {
			name string
			alg  tlog.Algorithm
		}{logMLDSAKeyFile, tlog.CosignatureMLDSA44})
	}
	var keys []string
	for _, kf := range files {
		path := filepath.Join(dir, kf.name)
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			skey, _, gerr := tlog.GenerateKey(rand.Reader, origin, kf.alg)
			if gerr != nil {
				return nil, gerr
			}
			if err := writeNew(path, []byte(skey+"\n")); err != nil {
				return nil, err
			}
			log.Info("generated Merkle log key", "file", path, "origin", origin)
			b = []byte(skey)
		} else if err != nil {
			return nil, fmt.Errorf("couldn't read log key: %w", err)
		}
		keys = append(keys, strings.TrimSpace(string(b)))
	}
	return keys, nil
}

// keyName returns the name of a signed-note signer key,
// "PRIVATE+KEY+<name>+<id>+<key>"; for the log's Ed25519 key it is the
// origin.
func keyName(skey string) string {
	parts := strings.SplitN(skey, "+", 5)
	if len(parts) != 5 {
		return ""
	}
	return parts[2]
}

// writeNew creates path with mode 0600, refusing to overwrite.
func writeNew(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}

// openLog opens the Merkle log over store. It refuses to start from a stored
// tree that does not match the last signed checkpoint (tlog.ErrInconsistent).
func (f *logFlags) openLog(ctx context.Context, store storeopen.Store, keysDir string, log *slog.Logger) (*tlog.Log, error) {
	st := store.LogStorage()
	keys, err := f.loadLogKeys(keysDir, log)
	if err != nil {
		return nil, err
	}
	if f.stamper, err = f.newStamper(st, log); err != nil {
		return nil, err
	}
	if f.policyFile != "" {
		b, err := os.ReadFile(f.policyFile)
		if err != nil {
			return nil, fmt.Errorf("couldn't read --witness-policy: %w", err)
		}
		if f.policy, err = tlog.ParseWitnessPolicy(b); err != nil {
			return nil, fmt.Errorf("--witness-policy %s: %w", f.policyFile, err)
		}
	}
	cfg := tlog.Config{Origin: keyName(keys[0]), Keys: keys, Witnesses: f.witnesses, WitnessPolicy: f.policy, PublishDir: f.publishDir, Logger: log}
	if f.stamper != nil {
		cfg.OnCheckpoint = func(tlog.Checkpoint) { f.stamper.Notify() }
	}
	l, err := tlog.New(ctx, st, cfg)
	if err != nil {
		return nil, fmt.Errorf("couldn't open the Merkle log: %w", err)
	}
	f.mlog = l
	return l, nil
}

// evidenceOptions configure bundle export, online verification and
// re-verification: bundles carry the public response keys and the witness
// policy; the server's own checks also trust its HMAC keys and log keys.
func (f *logFlags) evidenceOptions(store evidence.Store, l evidence.Log, keySet *sig.KeySet, log *slog.Logger) web.EvidenceOptions {
	var opts evidence.Options
	for _, id := range keySet.KeyIDs() {
		if k, _ := keySet.Get(id); k.Algorithm() != sig.HMACSHA256 {
			opts.ResponseKeys = append(opts.ResponseKeys, k)
		}
	}
	for _, w := range f.witnesses {
		opts.Witnesses = append(opts.Witnesses, w.VerifierKey)
	}
	if len(opts.Witnesses) > 0 {
		opts.WitnessQuorum = f.quorum
	}
	if f.policy != nil {
		// A bundle carries k of n; the policy's groups are checked by the
		// log before it publishes, the bundle by the fewest witnesses that
		// can satisfy them.
		opts.Witnesses = append(opts.Witnesses, f.policy.VerifierKeys()...)
		opts.WitnessQuorum = f.policy.MinWitnesses()
	}
	opts.TSACerts = f.tsaPEM
	trust := &verify.Trust{ResponseKeys: keySet, Checkpoint: verify.CheckpointPolicy{
		LogKeys: l.VerifierKeys(), Witnesses: opts.Witnesses, WitnessQuorum: opts.WitnessQuorum,
	}, TSARoots: f.tsaPool}
	ev := web.EvidenceOptions{Log: l, Bundle: opts, Trust: trust}
	ev.Reverifier = evidence.NewReverifier(store, l, opts, trust, nil, log)
	return ev
}

// runLogKey prints the log's origin and note verifier keys, or with
// --trust-file the trust file an auditor gives acsverify --trust.
func runLogKey(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("log-key", stderr)
	keys := flags.String("keys", "", "key directory, as for serve (default: keys/ beside the embedded store)")
	db := flags.String("db", "", "store URL, to find the default key directory")
	trustFile := flags.Bool("trust-file", false, "print instead a trust file for acsverify --trust: the log's verifier keys (log_keys) and the public response keys of the key directory (response_keys; never an HMAC secret)")
	if err := parseFlags(flags, args); err != nil {
		return err
	}
	dir := *keys
	if dir == "" {
		dir = defaultKeysDir(storeURL(*db))
	}
	var skeys []string
	for _, name := range []string{logKeyFile, logMLDSAKeyFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) && name != logKeyFile {
			continue
		}
		if err != nil {
			return fmt.Errorf("couldn't read the log key (does 'acsledger serve' with these keys exist yet?): %w", err)
		}
		skeys = append(skeys, strings.TrimSpace(string(b)))
	}
	origin, vkeys, err := tlog.VerifierKeysFor(tlog.Config{Origin: keyName(skeys[0]), Keys: skeys})
	if err != nil {
		return err
	}
	if *trustFile {
		return printTrustFile(stdout, dir, vkeys)
	}
	fmt.Fprintf(stdout, "origin: %s\n", origin)
	for _, v := range vkeys {
		fmt.Fprintln(stdout, v)
	}
	return nil
}

// printTrustFile prints the trust file (verify.BundleKeys) of the log's
// verifier keys vkeys and the asymmetric public response keys in dir.
func printTrustFile(stdout io.Writer, dir string, vkeys []string) error {
	kd, err := sig.LoadKeyDir(dir)
	if err != nil {
		return err
	}
	t := verify.BundleKeys{LogKeys: vkeys}
	for _, id := range kd.KeySet.KeyIDs() {
		k, _ := kd.KeySet.Get(id)
		if k.Algorithm().Symmetric() {
			continue // a secret: an auditor's --hmac-ikm, never a trust file
		}
		b, err := k.MarshalPublic()
		if err != nil {
			return err
		}
		t.ResponseKeys = append(t.ResponseKeys, b)
	}
	return printJSON(stdout, t)
}

// runWitness runs a minimal c2sp.org/tlog-witness witness for one log.
func runWitness(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("witness", stderr)
	addr := flags.String("addr", "127.0.0.1:8081", "listen address")
	keyFile := flags.String("key", "", "file holding the witness's cosignature signer key (generated if missing)")
	name := flags.String("name", "acsledger-witness", "the witness's key name, used when generating its key")
	state := flags.String("state", "", "JSON file keeping the latest cosigned size per log (required)")
	origin := flags.String("log-origin", "", "origin of the log to witness (required)")
	var logKeys []string
	flags.Func("log-key", "a verifier key of the log (repeatable, at least one)", func(v string) error {
		logKeys = append(logKeys, v)
		return nil
	})
	if err := parseFlags(flags, args); err != nil {
		return err
	}
	if *keyFile == "" || *state == "" || *origin == "" || len(logKeys) == 0 {
		return fmt.Errorf("%w: --key, --state, --log-origin and --log-key are required", errUsage)
	}
	log := newLogger(stderr)
	b, err := os.ReadFile(*keyFile)
	if errors.Is(err, fs.ErrNotExist) {
		skey, _, gerr := tlog.GenerateKey(rand.Reader, *name, tlog.CosignatureEd25519)
		if gerr != nil {
			return gerr
		}
		if err := writeNew(*keyFile, []byte(skey+"\n")); err != nil {
			return err
		}
		b = []byte(skey)
	} else if err != nil {
		return err
	}
	skey := strings.TrimSpace(string(b))
	_, vkeys, err := tlog.VerifierKeysFor(tlog.Config{Origin: keyName(skey), Keys: []string{skey}})
	if err != nil {
		return fmt.Errorf("witness key: %w", err)
	}
	w, err := witness.New(witness.Config{Key: skey, StatePath: *state, Logs: []witness.Log{{Origin: *origin, VerifierKeys: logKeys}}})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	log.Info("witness serving", "url", "http://"+ln.Addr().String(), "verifier_key", vkeys[0])
	srv := &http.Server{Handler: w, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
