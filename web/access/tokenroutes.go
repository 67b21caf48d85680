package access

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/web/httpapi"
)

// TokenJSON is a stored token as the admin API and `acsledger token list
// --json` show it: never the token.
type TokenJSON struct {
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

// NewTokenJSON describes t without its secret.
func NewTokenJSON(t ledger.Token) TokenJSON {
	return TokenJSON{Name: t.Name, Role: t.Role, Scope: t.Scope, CreatedAt: t.CreatedAt, ExpiresAt: optionalTime(t.ExpiresAt), RevokedAt: optionalTime(t.RevokedAt)}
}

var errNoTokenStore = httpapi.NewError(http.StatusNotImplemented, "this server keeps no tokens")

// withTokens serves h with the token store, or answers 501 on a server
// that keeps no tokens.
func (c *Control) withTokens(h func(w http.ResponseWriter, r *http.Request, ts Tokens)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c.opts.Tokens == nil {
			c.fail(w, r, errNoTokenStore)
			return
		}
		h(w, r, c.opts.Tokens)
	}
}

func (c *Control) listTokens(w http.ResponseWriter, r *http.Request, ts Tokens) {
	list, err := ts.Tokens(r.Context())
	if err != nil {
		c.fail(w, r, err)
		return
	}
	httpapi.WriteList(w, "tokens", list, NewTokenJSON)
}

// createToken takes {"name", "role", "scope", "expires_in"} (a Go
// duration such as "720h") and answers the token once.
func (c *Control) createToken(w http.ResponseWriter, r *http.Request, ts Tokens) {
	var body struct {
		Name      string `json:"name"`
		Role      Role   `json:"role"`
		Scope     string `json:"scope"`
		ExpiresIn string `json:"expires_in"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		c.fail(w, r, fmt.Errorf("%w: %w", errBadToken, err))
		return
	}
	if _, err := dec.Token(); err != io.EOF {
		c.fail(w, r, fmt.Errorf("%w: data after the JSON object", errBadToken))
		return
	}
	req := TokenRequest{Name: body.Name, Role: body.Role, Scope: body.Scope}
	if body.ExpiresIn != "" {
		var err error
		if req.ExpiresIn, err = time.ParseDuration(body.ExpiresIn); err != nil {
			c.fail(w, r, fmt.Errorf("%w: expires_in %q is not a duration such as 720h", errBadToken, body.ExpiresIn))
			return
		}
	}
	token, t, err := CreateToken(r.Context(), ts, req, c.opts.Now())
	if err != nil {
		c.fail(w, r, err)
		return
	}
	p := PrincipalFrom(r.Context())
	c.log.Info("token created", "name", t.Name, "role", t.Role, "scope", t.Scope, "by", p.Name)
	out := NewTokenJSON(t)
	out.Token = token
	w.Header().Set("Cache-Control", "no-store")
	httpapi.WriteJSON(w, http.StatusCreated, out)
}

func (c *Control) revokeToken(w http.ResponseWriter, r *http.Request, ts Tokens) {
	name := httpapi.PathParam(r, "name")
	if err := ts.RevokeToken(r.Context(), name, c.opts.Now().UTC().Truncate(time.Microsecond)); err != nil {
		c.fail(w, r, err)
		return
	}
	c.log.Info("token revoked", "name", name, "by", PrincipalFrom(r.Context()).Name)
	httpapi.WriteJSON(w, http.StatusOK, map[string]string{"revoked": name})
}
