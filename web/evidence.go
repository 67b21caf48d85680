package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/guardian/replay"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/verify"
)

// DefaultMaxBundleBytes caps an uploaded evidence bundle.
const DefaultMaxBundleBytes = 64 << 20

// EvidenceOptions configure the evidence routes: bundle export, online
// verification, whole-ledger re-verification and decision replay. The zero
// value serves them without a Merkle log (bundles are not anchored and
// verify with not_anchored), with the keys bundles carry, and with the
// admin routes disabled.
type EvidenceOptions struct {
	// Log is the Merkle log bundles are anchored in; nil for none (leave
	// it nil rather than storing a nil *tlog.Log in it).
	Log evidence.Log
	// Bundle says which keys bundles carry (the Guardian's public response
	// keys, the witness policy).
	Bundle evidence.Options
	// Trust is what online verification trusts: the response keys (HMAC
	// IKMs included, which no bundle carries), the log keys and the witness
	// policy. Nil means the keys of the bundle itself, with the notice
	// keys_from_bundle.
	Trust *verify.Trust
	// Reverifier runs whole-ledger re-verification for the admin routes;
	// the caller runs its Schedule. Nil makes one from the fields above
	// (runs then only start through POST /api/v1/admin/reverify).
	Reverifier *evidence.Reverifier
	// MaxBundleBytes caps an uploaded bundle; 0 means DefaultMaxBundleBytes.
	MaxBundleBytes int64
	// MaxConcurrentVerifications bounds the uploaded bundles verified at
	// once; 0 means DefaultMaxConcurrentVerifications. More are answered
	// 503 with Retry-After.
	MaxConcurrentVerifications int
}

// evidenceAPI serves the evidence routes over the server's store.
type evidenceAPI struct {
	s    *Server
	opts EvidenceOptions
	// verifying holds one token per upload being verified.
	verifying chan struct{}
}

// mountEvidence adds the evidence routes to r, the /api/v1 router.
func (s *Server) mountEvidence(r chi.Router, opts EvidenceOptions) {
	if opts.MaxBundleBytes <= 0 {
		opts.MaxBundleBytes = DefaultMaxBundleBytes
	}
	if opts.MaxConcurrentVerifications <= 0 {
		opts.MaxConcurrentVerifications = DefaultMaxConcurrentVerifications
	}
	a := &evidenceAPI{s: s, opts: opts, verifying: make(chan struct{}, opts.MaxConcurrentVerifications)}
	if opts.Reverifier == nil {
		a.opts.Reverifier = evidence.NewReverifier(s.store, opts.Log, opts.Bundle, a.trust(), nil, s.log)
	}
	r.Get("/sessions/{session_id}/bundle", a.bundle)
	r.Get("/sessions/{session_id}/verify", a.verifySession)
	r.Post("/verify/bundle", a.verifyBundle)
	r.Post("/decisions/{request_id}/replay", a.replay)
	a.mountDecisions(r)
	a.mountSearch(r)
	r.Post("/admin/reverify", a.startReverify)
	r.Get("/admin/reverify", a.reverifyStatus)
}

// Errors of the evidence routes; statusFor maps them.
var (
	errMalformedBundle = errors.New("malformed evidence bundle")
)

func (a *evidenceAPI) fail(w http.ResponseWriter, r *http.Request, err error) { a.s.fail(w, r, err) }

func (a *evidenceAPI) trust() *verify.Trust {
	if a.opts.Trust != nil {
		return a.opts.Trust
	}
	return &verify.Trust{}
}

// bundle streams a session's evidence bundle. include_policies=true adds
// the policy bundles' content; since_size=N the checkpoint signed at tree
// size N (an earlier bundle's) and a consistency proof from it, as
// `acsledger export --since-size` does.
func (a *evidenceAPI) bundle(w http.ResponseWriter, r *http.Request) {
	gs := a.s.store
	id := pathParam(r, "session_id")
	opts := a.opts.Bundle
	if v := r.URL.Query().Get("include_policies"); v != "" {
		var err error
		if opts.IncludePolicies, err = strconv.ParseBool(v); err != nil {
			a.fail(w, r, fmt.Errorf("%w: query parameter include_policies=%q is not a boolean", errBadRequest, v))
			return
		}
	}
	if v := r.URL.Query().Get("since_size"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			a.fail(w, r, fmt.Errorf("%w: query parameter since_size=%q is not a tree size (a whole number above 0)", errBadRequest, v))
			return
		}
		opts.SinceSize = n
	}
	if _, err := gs.Session(r.Context(), id); err != nil {
		a.fail(w, r, err)
		return
	}
	lw := &lazyWriter{w: w, start: func() {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", "evidence-"+safeName(id)+".json"))
		w.WriteHeader(http.StatusOK)
	}}
	if _, err := evidence.Build(r.Context(), gs, a.opts.Log, id, lw, opts); err != nil {
		if !lw.started {
			a.fail(w, r, err)
			return
		}
		// The status line is gone; the bundle is cut short, so no
		// verifier accepts it.
		a.s.log.Error("bundle stream failed", "session", id, "err", err)
	}
}

// lazyWriter sends the response header on the first write, so that an
// error before any byte of the bundle still gets its own status.
type lazyWriter struct {
	w       io.Writer
	start   func()
	started bool
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	if !l.started {
		l.started = true
		l.start()
	}
	return l.w.Write(p)
}

// safeName keeps a file name to characters every client accepts.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x80 && (r == '-' || r == '_' || r == '.' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return r
		}
		return '_'
	}, s)
}

// verifySession replays a session from the store and answers the report
// `acsverify bundle --json` gives for its exported bundle.
func (a *evidenceAPI) verifySession(w http.ResponseWriter, r *http.Request) {
	gs := a.s.store
	rep, err := evidence.Verify(r.Context(), gs, a.opts.Log, pathParam(r, "session_id"), a.opts.Bundle, a.trust())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, evidence.NewReport(rep))
}

type reverifyJSON struct {
	Current *evidence.RunStatus `json:"current"`
	Last    *evidence.RunStatus `json:"last"`
}

func (a *evidenceAPI) startReverify(w http.ResponseWriter, r *http.Request) {
	// The run outlives the request; it stops with the process.
	if err := a.opts.Reverifier.Start(context.WithoutCancel(r.Context())); err != nil {
		a.fail(w, r, err)
		return
	}
	cur, last := a.opts.Reverifier.Status()
	writeJSON(w, http.StatusAccepted, reverifyJSON{cur, last})
}

func (a *evidenceAPI) reverifyStatus(w http.ResponseWriter, r *http.Request) {
	cur, last := a.opts.Reverifier.Status()
	writeJSON(w, http.StatusOK, reverifyJSON{cur, last})
}

// replayRequest is the body of POST /decisions/{request_id}/replay.
type replayRequest struct {
	Params        json.RawMessage   `json:"params"`
	SessionID     string            `json:"session_id"`
	PolicyVersion string            `json:"policy_version"`
	Provenance    []json.RawMessage `json:"provenance"`
}

func (a *evidenceAPI) replay(w http.ResponseWriter, r *http.Request) {
	gs := a.s.store
	req, err := a.decodeReplay(w, r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := replay.Replay(r.Context(), scopedFor(r, gs), replay.Request{
		RequestID: pathParam(r, "request_id"), SessionID: req.SessionID,
		Params: req.Params, Provenance: req.Provenance, PolicyVersion: req.PolicyVersion,
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// decodeReplay parses the body strictly: one JSON object (no duplicate
// members, valid UTF-8, nothing after it) with known members only.
func (a *evidenceAPI) decodeReplay(w http.ResponseWriter, r *http.Request) (*replayRequest, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.s.maxBody))
	if err != nil {
		return nil, fmt.Errorf("couldn't read the replay request: %w", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		// Nothing to override: replay the recorded request as recorded.
		return &replayRequest{}, nil
	}
	if _, err := acs.Canonicalize(body); err != nil {
		return nil, fmt.Errorf("%w: the body is not one well-formed JSON object: %v", replay.ErrBadRequest, err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req replayRequest
	if err := dec.Decode(&req); err != nil {
		return nil, fmt.Errorf("%w: %v", replay.ErrBadRequest, err)
	}
	if len(req.Params) > 0 && req.Params[0] != '{' {
		return nil, fmt.Errorf("%w: params must be a JSON object", replay.ErrBadRequest)
	}
	return &req, nil
}
