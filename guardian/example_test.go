package guardian_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/storeopen"
)

// A Guardian over an embedded store, answering a liveness probe on stdio.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "guardian-example")
	defer os.RemoveAll(dir)
	st, err := storeopen.Open(ctx, "sqlite:"+dir, ledger.Options{})
	if err != nil {
		panic(err)
	}
	defer st.Close()

	hmacKey, _ := sig.ParseHMACKeyFlag("agent-key=" + strings.Repeat("ab", 32))
	responseKey, _ := sig.GenerateKey(sig.ECDSAP256, "guardian-1")
	cfg := guardian.Config{
		Store:  st,
		Policy: &guardian.TestPolicy{PolicyID: "example", PolicyVersion: "1"},
		Logger: slog.New(slog.DiscardHandler),
	}
	if err := cfg.SetSigningKeys([]*sig.PrivateKey{hmacKey, responseKey}, ""); err != nil {
		panic(err)
	}
	g, err := guardian.New(cfg)
	if err != nil {
		panic(err)
	}

	ping := `{"jsonrpc":"2.0","id":1,"method":"system/ping","params":{"acs_version":"0.1.0",
	"request_id":"6f1d2c3b-0a4e-4f5a-9b8c-7d6e5f4a3b2c","timestamp":"2026-11-30T05:00:00Z",
	"metadata":{"agent_id":"agent-7","session_id":"0b6c3d2e-1f4a-4b5c-8d9e-0f1a2b3c4d5e"},
	"payload":{"echo":"hello"}}}`
	in := fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(ping), ping)
	var out bytes.Buffer
	if err := g.ServeStdio(ctx, strings.NewReader(in), &out); err != nil {
		panic(err)
	}
	_, body, _ := strings.Cut(out.String(), "\r\n\r\n")
	var r struct {
		Result struct {
			Decision  string
			Payload   map[string]string
			Signature struct {
				Algorithm string
				KeyID     string `json:"key_id"`
			}
		}
	}
	_ = json.Unmarshal([]byte(body), &r)
	fmt.Println(r.Result.Decision, r.Result.Payload["status"], r.Result.Payload["echo"], r.Result.Signature.Algorithm, r.Result.Signature.KeyID)
	// Output:
	// allow ok hello ECDSA-P256 guardian-1
}
