package access

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/web/httpapi"
)

// TokenPrefix starts every token acsledger makes, so that a token pasted
// into the wrong place is recognisable (and secret scanners can find it).
const TokenPrefix = "acsl_"

// tokenRandomBytes is the entropy of a token: 256 bits.
const tokenRandomBytes = 32

// NewToken returns a fresh random token and its SHA-256, the only form in
// which it is stored.
func NewToken() (token string, hash [32]byte) {
	b := make([]byte, tokenRandomBytes)
	rand.Read(b) // crypto/rand.Read never returns an error
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return token, HashToken(token)
}

// HashToken is the SHA-256 of a token string: what the store keeps and
// what a presented token is looked up by.
func HashToken(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// wellFormed reports whether s has the shape of a token NewToken makes.
func wellFormed(s string) bool {
	rest, ok := strings.CutPrefix(s, TokenPrefix)
	if !ok || len(rest) != base64.RawURLEncoding.EncodedLen(tokenRandomBytes) {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(rest)
	return err == nil
}

// TokenRequest describes a token to create.
type TokenRequest struct {
	// Name is unique; empty picks "<role>-<8 hex digits>".
	Name string `json:"name"`
	Role Role   `json:"role"`
	// Scope limits the token to agent ids with this prefix; empty for all.
	Scope string `json:"scope"`
	// ExpiresIn is how long the token lasts from now; 0 never expires.
	ExpiresIn time.Duration `json:"-"`
}

// Errors of token creation; httpapi.StatusFor answers them 400.
var errBadToken = httpapi.NewError(http.StatusBadRequest, "bad token request")

// CreateToken makes a token as req says, stores its hash in ts and
// returns the token: the only time it exists outside its holder's hands.
// The CLI (acsledger token create), the admin API and the first start's
// admin token all make tokens here.
func CreateToken(ctx context.Context, ts Tokens, req TokenRequest, now time.Time) (string, ledger.Token, error) {
	if !ValidRole(string(req.Role)) {
		return "", ledger.Token{}, fmt.Errorf("%w: role %q is not one of admin, writer, auditor, viewer, metrics", errBadToken, req.Role)
	}
	if req.ExpiresIn < 0 {
		return "", ledger.Token{}, fmt.Errorf("%w: the expiry must not be negative", errBadToken)
	}
	if req.Name == "" {
		req.Name = string(req.Role) + "-" + acs.NewUUID()[:8]
	}
	if strings.TrimSpace(req.Name) != req.Name || len(req.Name) > 128 || strings.ContainsFunc(req.Name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", ledger.Token{}, fmt.Errorf("%w: a token name is 1 to 128 printable characters without surrounding spaces", errBadToken)
	}
	if req.Name == BootstrapName {
		return "", ledger.Token{}, fmt.Errorf("%w: the name %s is the bootstrap token's ($ACSLEDGER_ADMIN_TOKEN)", errBadToken, BootstrapName)
	}
	token, hash := NewToken()
	// Stored to the microsecond, as both stores keep it.
	now = now.UTC().Truncate(time.Microsecond)
	t := ledger.Token{Name: req.Name, Hash: hash, Role: string(req.Role), Scope: req.Scope, CreatedAt: now}
	if req.ExpiresIn > 0 {
		t.ExpiresAt = now.Add(req.ExpiresIn)
	}
	if err := ts.CreateToken(ctx, t); err != nil {
		return "", ledger.Token{}, err
	}
	return token, t, nil
}
