package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/internal/acsagent"
	"github.com/acsledger/acsledger/internal/demo"
	"github.com/acsledger/acsledger/internal/keydir"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

// runDemo is `acsledger demo`: a short, realistic multi-session agent
// workload sent to a running server over HTTP, so that a new user sees
// decisions and verifiable evidence within a minute.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", stderr)
	base := fs.String("url", "http://127.0.0.1:8080", "base URL of a running 'acsledger serve'")
	keysDir := fs.String("keys", "", "the server's key directory, for its HMAC key (default: serve's, ./acsledger-data/keys or, for a PostgreSQL store, ./acsledger-keys)")
	approverDir := fs.String("approver-keys", "", "directory with the approver's private key (key_id security-oncall, the baseline's approver) to grant the ASK")
	out := fs.String("out", "", "directory to write each session's signed responses to (default: a new temporary directory)")
	tokenFile := fs.String("token-file", "", "file holding a token that may read sessions, to fetch the chains (default: $ACSLEDGER_TOKEN, else $ACSLEDGER_ADMIN_TOKEN, else admin-token beside the --keys directory, else serve's first admin token file, "+keydir.AdminTokenFile("")+")")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	givenKeys := *keysDir
	if *keysDir == "" {
		*keysDir = filepath.Join(storeopen.DefaultDir, "keys")
		if _, err := os.Stat(*keysDir); err != nil {
			if _, err := os.Stat(defaultKeysDir("postgres://")); err == nil {
				*keysDir = defaultKeysDir("postgres://")
			}
		}
	}
	key, err := acsagent.HMACKey(*keysDir)
	if err != nil {
		return fmt.Errorf("%w (start the server first with 'acsledger serve', which creates its keys, or pass --keys)", err)
	}
	kd, err := sig.LoadKeyDir(*keysDir)
	if err != nil {
		return err
	}
	var approvers []*sig.PrivateKey
	if *approverDir != "" {
		ad, err := sig.LoadKeyDir(*approverDir)
		if err != nil {
			return fmt.Errorf("couldn't load approver keys: %w", err)
		}
		approvers = ad.Private
	}
	dir := *out
	if dir == "" {
		if dir, err = os.MkdirTemp("", "acsledger-demo-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	token, tokenFrom, err := demoToken(*tokenFile, givenKeys)
	if err != nil {
		return err
	}
	return demo.Run(ctx, demo.Config{
		Base: strings.TrimRight(*base, "/"), Key: key, Keys: kd.KeySet, KeysDir: *keysDir, Approvers: approvers,
		Token: token, TokenFrom: tokenFrom, Client: &http.Client{Timeout: 30 * time.Second}, Out: stdout, Dir: dir,
	})
}

// demoToken finds a token to read the chains back with: $ACSLEDGER_TOKEN,
// $ACSLEDGER_ADMIN_TOKEN, or the file serve saved its first admin token
// in: admin-token beside the key directory given with --keys (serve
// --db DIR keeps DIR/keys and DIR/admin-token), else serve's default
// file. It returns the token and, for the printed hints, a shell expression
// that yields it (never the token itself).
func demoToken(file, keysDir string) (string, string, error) {
	if file == "" {
		for _, env := range []string{"ACSLEDGER_TOKEN", "ACSLEDGER_ADMIN_TOKEN"} {
			if v := os.Getenv(env); v != "" {
				return v, "$" + env, nil
			}
		}
		file = keydir.AdminTokenFile("")
		if beside := filepath.Join(filepath.Dir(keysDir), "admin-token"); keysDir != "" {
			if _, err := os.Stat(beside); err == nil {
				file = beside
			}
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", "", fmt.Errorf("couldn't read a token to fetch the chains with: %w (set ACSLEDGER_TOKEN or pass --token-file)", err)
	}
	return strings.TrimSpace(string(b)), "$(cat " + file + ")", nil
}
