package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/acsledger/acsledger/ledger"
)

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

// Errors of token creation; statusFor maps them.
var errBadToken = errors.New("bad token request")

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
		req.Name = string(req.Role) + "-" + uuid4()[:8]
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

// tokenJSON is a stored token as the admin API lists it: never the token.
type tokenJSON struct {
	Name      string     `json:"name"`
	Role      string     `json:"role"`
	Scope     string     `json:"scope"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at"`
	RevokedAt *time.Time `json:"revoked_at"`
	// Token is set once, in the answer that created it.
	Token string `json:"token,omitempty"`
}

func optionalTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func toTokenJSON(t ledger.Token) tokenJSON {
	return tokenJSON{Name: t.Name, Role: t.Role, Scope: t.Scope, CreatedAt: t.CreatedAt, ExpiresAt: optionalTime(t.ExpiresAt), RevokedAt: optionalTime(t.RevokedAt)}
}

var errNoTokenStore = errors.New("this server keeps no tokens")

func (s *Server) tokenStore() (Tokens, error) {
	if s.auth.opts.Tokens == nil {
		return nil, errNoTokenStore
	}
	return s.auth.opts.Tokens, nil
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) {
	ts, err := s.tokenStore()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	list, err := ts.Tokens(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := struct {
		Tokens []tokenJSON `json:"tokens"`
	}{Tokens: []tokenJSON{}}
	for _, t := range list {
		out.Tokens = append(out.Tokens, toTokenJSON(t))
	}
	writeJSON(w, http.StatusOK, out)
}

// createToken takes {"name", "role", "scope", "expires_in"} (a Go
// duration such as "720h") and answers the token once.
func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	ts, err := s.tokenStore()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var body struct {
		Name      string `json:"name"`
		Role      Role   `json:"role"`
		Scope     string `json:"scope"`
		ExpiresIn string `json:"expires_in"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		s.fail(w, r, fmt.Errorf("%w: %w", errBadToken, err))
		return
	}
	if _, err := dec.Token(); err != io.EOF {
		s.fail(w, r, fmt.Errorf("%w: data after the JSON object", errBadToken))
		return
	}
	req := TokenRequest{Name: body.Name, Role: body.Role, Scope: body.Scope}
	if body.ExpiresIn != "" {
		if req.ExpiresIn, err = time.ParseDuration(body.ExpiresIn); err != nil {
			s.fail(w, r, fmt.Errorf("%w: expires_in %q is not a duration such as 720h", errBadToken, body.ExpiresIn))
			return
		}
	}
	token, t, err := CreateToken(r.Context(), ts, req, s.auth.opts.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p := principalFrom(r.Context())
	s.log.Info("token created", "name", t.Name, "role", t.Role, "scope", t.Scope, "by", p.Name)
	out := toTokenJSON(t)
	out.Token = token
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	ts, err := s.tokenStore()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	name := pathParam(r, "name")
	if err := ts.RevokeToken(r.Context(), name, s.auth.opts.Now().UTC().Truncate(time.Microsecond)); err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("token revoked", "name", name, "by", principalFrom(r.Context()).Name)
	writeJSON(w, http.StatusOK, map[string]string{"revoked": name})
}
