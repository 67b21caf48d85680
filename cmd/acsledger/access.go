package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/acsledger/acsledger/internal/keydir"
	"github.com/acsledger/acsledger/internal/term"
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
	return keydir.AdminTokenFile(storeURL)
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
	if err := keydir.WriteSecret(path, token+"\n"); err != nil {
		return fmt.Errorf("couldn't save the first admin token: %w", err)
	}
	abs, _ := filepath.Abs(path)
	for _, w := range []io.Writer{stdout, stderr} {
		if term.Is(w) {
			fmt.Fprintf(w, "\nThe first admin token (shown once; saved in %s):\n\n  %s\n\nLog in at /ui/login with it, or send it as Authorization: Bearer. 'acsledger token create' makes others.\n\n", abs, token)
			break
		}
	}
	log.Info("created the first admin token", "name", "admin", "file", abs)
	return nil
}
