package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/acsledger/acsledger/ledger/storeopen"
	"github.com/acsledger/acsledger/web"
)

// accessFlags are serve's access control flags.
type accessFlags struct {
	adminTokenFile string
	tlsCert        string
	tlsKey         string
	rateLimit      float64
	sessionTTL     time.Duration
	acsToken       bool
}

func (f *accessFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.adminTokenFile, "admin-token-file", "", "where the first start saves its admin token, mode 0600 (default: admin-token in the embedded store's directory, or ./acsledger-admin-token for PostgreSQL)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "serve HTTPS with this certificate chain (PEM); needs --tls-key")
	fs.StringVar(&f.tlsKey, "tls-key", "", "the private key of --tls-cert (PEM, mode 0600)")
	fs.Float64Var(&f.rateLimit, "rate-limit", web.DefaultRatePerSecond, "requests per second per address and per credential on the routes that need one (bursts of twice that); negative: no limit")
	fs.DurationVar(&f.sessionTTL, "session-ttl", web.DefaultSessionTTL, "how long a UI login lasts")
	fs.BoolVar(&f.acsToken, "acs-require-token", false, "POST /acs and /acs/approvals also need a writer token, and each ACS session is bound to the token that opened it")
}

// rateLimits applies --rate-limit; a negative one turns off the limit on
// failed authentications too.
func (f *accessFlags) rateLimits() web.RateLimits {
	rl := web.RateLimits{PerAddress: f.rateLimit, PerCredential: f.rateLimit}
	if f.rateLimit < 0 {
		rl.FailuresPerMinute = -1
	}
	return rl
}

// adminTokenPath is where the first admin token is saved.
func (f *accessFlags) adminTokenPath(storeURL string) string {
	if f.adminTokenFile != "" {
		return f.adminTokenFile
	}
	return defaultAdminTokenFile(storeURL)
}

func defaultAdminTokenFile(storeURL string) string {
	if t, err := storeopen.Parse(storeURL); err == nil && t.Dir != "" {
		return filepath.Join(t.Dir, "admin-token")
	}
	return "acsledger-admin-token"
}

// errExposed reports a secret file that group or others can read.
var errExposed = errors.New("readable by group or others")

// checkPrivate refuses a secret file whose mode lets anyone but its owner
// read it, saying how to fix it. A missing file passes.
func checkPrivate(path string) error {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("couldn't check %s: %w", path, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s is %w (mode %04o): it holds a secret; run: chmod 600 %s", path, errExposed, st.Mode().Perm(), path)
	}
	return nil
}

// checkKeyDir refuses private key files in dir that group or others can
// read: the Guardian's *.key.json and the log's *.note.key. Public keys
// (*.pub.json) may be readable.
func checkKeyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("couldn't read key directory %s: %w", dir, err)
	}
	var errs []error
	for _, e := range ents {
		n := e.Name()
		if e.Type().IsRegular() && (strings.HasSuffix(n, ".key.json") || strings.HasSuffix(n, ".key")) {
			errs = append(errs, checkPrivate(filepath.Join(dir, n)))
		}
	}
	return errors.Join(errs...)
}

// firstAdminToken makes the first admin token when the store holds none
// and no bootstrap token is set: saved with mode 0600 at path and shown
// once on a terminal, never in a log.
func firstAdminToken(ctx context.Context, ts web.Tokens, path string, stdout, stderr io.Writer, log *slog.Logger) error {
	list, err := ts.Tokens(ctx)
	if err != nil {
		return err
	}
	if len(list) > 0 {
		return nil
	}
	token, _, err := web.CreateToken(ctx, ts, web.TokenRequest{Name: "admin", Role: web.RoleAdmin}, time.Now())
	if err != nil {
		return fmt.Errorf("couldn't create the first admin token: %w", err)
	}
	if err := writeSecret(path, token+"\n"); err != nil {
		return fmt.Errorf("couldn't save the first admin token: %w", err)
	}
	abs, _ := filepath.Abs(path)
	for _, w := range []io.Writer{stdout, stderr} {
		if isTerminal(w) {
			fmt.Fprintf(w, "\nThe first admin token (shown once; saved in %s):\n\n  %s\n\nLog in at /ui/login with it, or send it as Authorization: Bearer. 'acsledger token create' makes others.\n\n", abs, token)
			break
		}
	}
	log.Info("created the first admin token", "name", "admin", "file", abs)
	return nil
}

// writeSecret replaces path with content, mode 0600 from the start.
func writeSecret(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".admin-token-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(content); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// isTerminal reports whether w is a terminal, where a secret may be shown
// once; logs, files and pipes never get one. It takes any character
// device for a terminal (/dev/null too, where the token is simply lost),
// which needs no terminal library.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && st.Mode()&os.ModeDevice != 0
}
