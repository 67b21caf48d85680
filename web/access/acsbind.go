package access

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
)

// With Options.ACSRequireToken, POST /acs and POST /acs/approvals need
// a writer's (or an admin's) token beside the ACS signatures that
// authenticate them, and an ACS session is bound to the token that sent
// its first request: a request of that session sent with another token is
// refused, as is one naming an agent out of the token's scope. Approvals
// come from approvers, not the agent, so they need a token but are not
// bound. The Guardian still checks every signature as it does without the
// option.

// acsRoles may send ACS traffic when a token is required.
var acsRoles = []Role{RoleAdmin, RoleWriter}

// maxACSBindings bounds the session-to-token bindings kept in memory;
// past it the oldest half is forgotten (those sessions rebind on their
// next request).
const maxACSBindings = 100000

type acsBindings struct {
	mu    sync.Mutex
	names map[string]string // session_id -> token name
	order []string
}

func newACSBindings() *acsBindings { return &acsBindings{names: make(map[string]string)} }

// bind binds session to name unless it is bound to another name already.
func (b *acsBindings) bind(session, name string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if got, ok := b.names[session]; ok {
		return got == name
	}
	if len(b.order) >= maxACSBindings {
		for _, s := range b.order[:len(b.order)/2] {
			delete(b.names, s)
		}
		b.order = append([]string(nil), b.order[len(b.order)/2:]...)
	}
	b.names[session] = name
	b.order = append(b.order, session)
	return true
}

var (
	failBoundElsewhere = &authFailure{http.StatusForbidden, "wrong_token", "this session is bound to another token"}
	failACSScope       = &authFailure{http.StatusForbidden, "wrong_role", "the agent_id is outside this token's scope"}
)

// acsMetadata is what the binding reads of a JSON-RPC request.
type acsMetadata struct {
	Params struct {
		Metadata struct {
			SessionID string `json:"session_id"`
			AgentID   string `json:"agent_id"`
		} `json:"metadata"`
	} `json:"params"`
}

// checkACS applies the binding to a request of p, leaving its body for
// the Guardian to read. A body it cannot parse passes unchanged: the
// Guardian refuses it with the JSON-RPC error it deserves.
func (c *Control) checkACS(r *http.Request, p *Principal) *authFailure {
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
	if err != nil {
		return nil
	}
	var msgs []acsMetadata
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '[' {
		if json.Unmarshal(trimmed, &msgs) != nil {
			return nil
		}
	} else {
		var m acsMetadata
		if json.Unmarshal(body, &m) != nil {
			return nil
		}
		msgs = []acsMetadata{m}
	}
	for _, m := range msgs {
		if a := m.Params.Metadata.AgentID; a != "" && !p.Sees(a) {
			return failACSScope
		}
		if session := m.Params.Metadata.SessionID; session != "" && !c.acsBound.bind(session, p.Name) {
			return failBoundElsewhere
		}
	}
	return nil
}

// errReader returns err at the end of a re-read body, so that a body cut
// off by its cap still fails for the Guardian as it would have.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}
