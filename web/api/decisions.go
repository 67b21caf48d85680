package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/acsledger/acsledger/guardian/replay"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/web/access"
	"github.com/acsledger/acsledger/web/httpapi"
)

// The read-only routes an incident responder's decision view needs beside
// replay: the recorded policy bundle versions (what a decision can be
// replayed under) and one recorded decision by its request id.

// policyJSON is one recorded policy bundle version, named as the evidence
// bundle's policy_bundles names it (docs/evidence-bundle.md).
type policyJSON struct {
	PolicyID      string    `json:"policy_id"`
	PolicyVersion string    `json:"policy_version"`
	Digest        string    `json:"digest"`
	RecordedAt    time.Time `json:"recorded_at"`
	// Content is the bundle, standard base64 (encoding/json's []byte), with
	// include_content=true only.
	Content []byte `json:"content,omitempty"`
}

// listPolicies lists the recorded policy bundle versions, oldest first,
// optionally those of one policy_id; include_content=true adds each
// bundle's bytes.
func (a *API) listPolicies(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	content, err := httpapi.BoolParam(r, "include_content", false)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	list, err := a.store.PolicyBundles(r.Context())
	if err != nil {
		a.fail(w, r, fmt.Errorf("couldn't list policy bundles: %w", err))
		return
	}
	out := struct {
		Policies []policyJSON `json:"policies"`
	}{Policies: []policyJSON{}}
	id := q.Get("policy_id")
	for _, p := range list {
		if id != "" && p.ID != id {
			continue
		}
		pj := policyJSON{PolicyID: p.ID, PolicyVersion: p.Version, Digest: p.Digest, RecordedAt: p.RecordedAt.UTC()}
		if content {
			full, err := a.store.PolicyBundle(r.Context(), p.ID, p.Version)
			if err != nil {
				a.fail(w, r, fmt.Errorf("couldn't load policy bundle %s version %s: %w", p.ID, p.Version, err))
				return
			}
			pj.Content = full.Content
		}
		out.Policies = append(out.Policies, pj)
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// decisionJSON is one recorded step found by its request id: the entry as
// the entries route shows it, the signed response stored beside it, and
// the decision read from the response (the whole verdict) or, without
// one, from the entry.
type decisionJSON struct {
	entryJSON
	RequestID    string          `json:"request_id"`
	Response     json.RawMessage `json:"response"`
	Decision     json.RawMessage `json:"decision"`
	DecisionFrom string          `json:"decision_from"`
}

// getDecision finds the entry whose step_id is the request id, in the
// session named by session_id or in any session: one indexed lookup
// either way (replay.FindEntry, migration 0004).
func (a *API) getDecision(w http.ResponseWriter, r *http.Request) {
	id := httpapi.PathParam(r, "request_id")
	e, err := replay.FindEntry(r.Context(), scopedFor(r, a.store), id, r.URL.Query().Get("session_id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := decisionJSON{
		entryJSON: toEntryJSON(e),
		RequestID: id, Response: json.RawMessage("null"), Decision: json.RawMessage("null"),
	}
	resp, err := a.store.Response(r.Context(), e.SessionID, e.Position)
	switch {
	case err == nil:
		out.Response = resp
	case !errors.Is(err, ledger.ErrNotFound):
		a.fail(w, r, fmt.Errorf("couldn't read the response of session %s at position %d: %w", e.SessionID, e.Position, err))
		return
	}
	out.Decision, out.DecisionFrom = recordedDecision(resp, e.Content)
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// recordedDecision picks the decision to show: the signed response's
// result when it is a decision (it carries every field: modifications,
// ask and defer details), else the entry's decision member, else none.
func recordedDecision(resp, entry []byte) (json.RawMessage, string) {
	var env struct {
		Result json.RawMessage `json:"result"`
	}
	if len(resp) > 0 && json.Unmarshal(resp, &env) == nil && hasMember(env.Result, "decision") {
		return env.Result, "response"
	}
	var e struct {
		Decision json.RawMessage `json:"decision"`
	}
	if json.Unmarshal(entry, &e) == nil && len(e.Decision) > 0 && !bytes.Equal(e.Decision, []byte("null")) {
		return e.Decision, "entry"
	}
	return json.RawMessage("null"), ""
}

// hasMember reports whether obj is a JSON object with the member name.
func hasMember(obj json.RawMessage, name string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return false
	}
	_, ok := m[name]
	return ok
}

// scoped is the store as p sees it: sessions out of its scope answer as
// unknown ones do. Decision lookups and replay go through it, because
// they find their session from a request id.
type scoped struct {
	Store
	p *access.Principal
}

func (sc scoped) Session(ctx context.Context, id string) (ledger.Session, error) {
	sess, err := sc.Store.Session(ctx, id)
	if err == nil && !sc.p.Sees(sess.AgentID) {
		return ledger.Session{}, fmt.Errorf("session %q: %w", id, ledger.ErrNotFound)
	}
	return sess, err
}

func (sc scoped) EntriesByStep(ctx context.Context, stepID, sessionID string) ([]ledger.Entry, error) {
	es, err := sc.Store.EntriesByStep(ctx, stepID, sessionID)
	if err != nil {
		return nil, err
	}
	out := es[:0:0]
	for _, e := range es {
		sess, err := sc.Store.Session(ctx, e.SessionID)
		if err != nil {
			return nil, err
		}
		if sc.p.Sees(sess.AgentID) {
			out = append(out, e)
		}
	}
	return out, nil
}

// scopedFor is st as the request's principal sees it.
func scopedFor(r *http.Request, st Store) Store {
	p := access.PrincipalFrom(r.Context())
	if p == nil {
		return st
	}
	return scoped{Store: st, p: p}
}
