package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/internal/acsagent"
	"github.com/acsledger/acsledger/internal/demo"
	"github.com/acsledger/acsledger/internal/keydir"
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
		*keysDir = demo.ServeKeysDir()
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
	token, tokenFrom, err := demo.Token(*tokenFile, givenKeys)
	if err != nil {
		return err
	}
	return demo.Run(ctx, demo.Config{
		Base: strings.TrimRight(*base, "/"), Key: key, Keys: kd.KeySet, KeysDir: *keysDir, Approvers: approvers,
		Token: token, TokenFrom: tokenFrom, Client: &http.Client{Timeout: 30 * time.Second}, Out: stdout, Dir: dir,
	})
}
