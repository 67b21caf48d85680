package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/guardian/replay"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/web/httpapi"
)

// Errors of the evidence routes; httpapi.StatusFor answers them 400.
var errMalformedBundle = httpapi.NewError(http.StatusBadRequest, "malformed evidence bundle")

// bundle streams a session's evidence bundle. include_policies=true adds
// the policy bundles' content; since_size=N the checkpoint signed at tree
// size N (an earlier bundle's) and a consistency proof from it, as
// `acsledger export --since-size` does.
func (a *API) bundle(w http.ResponseWriter, r *http.Request) {
	id := httpapi.PathParam(r, "session_id")
	opts := a.opts.Bundle
	var err error
	if opts.IncludePolicies, err = httpapi.BoolParam(r, "include_policies", opts.IncludePolicies); err != nil {
		a.fail(w, r, err)
		return
	}
	if v := r.URL.Query().Get("since_size"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			a.fail(w, r, fmt.Errorf("%w: query parameter since_size=%q is not a tree size (a whole number above 0)", httpapi.ErrBadRequest, v))
			return
		}
		opts.SinceSize = n
	}
	if _, err := a.store.Session(r.Context(), id); err != nil {
		a.fail(w, r, err)
		return
	}
	lw := &lazyWriter{w: w, start: func() {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", "evidence-"+safeName(id)+".json"))
		w.WriteHeader(http.StatusOK)
	}}
	if _, err := evidence.Build(r.Context(), a.store, a.opts.Log, id, lw, opts); err != nil {
		if !lw.started {
			a.fail(w, r, err)
			return
		}
		// The status line is gone; the bundle is cut short, so no
		// verifier accepts it.
		a.log.Error("bundle stream failed", "session", id, "err", err)
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
func (a *API) verifySession(w http.ResponseWriter, r *http.Request) {
	rep, err := evidence.Verify(r.Context(), a.store, a.opts.Log, httpapi.PathParam(r, "session_id"), a.opts.Bundle, a.Trust())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, evidence.NewReport(rep))
}

type reverifyJSON struct {
	Current *evidence.RunStatus `json:"current"`
	Last    *evidence.RunStatus `json:"last"`
}

func (a *API) startReverify(w http.ResponseWriter, r *http.Request) {
	// The run outlives the request; it stops with the process.
	if err := a.opts.Reverifier.Start(context.WithoutCancel(r.Context())); err != nil {
		a.fail(w, r, err)
		return
	}
	cur, last := a.opts.Reverifier.Status()
	httpapi.WriteJSON(w, http.StatusAccepted, reverifyJSON{cur, last})
}

func (a *API) reverifyStatus(w http.ResponseWriter, r *http.Request) {
	cur, last := a.opts.Reverifier.Status()
	httpapi.WriteJSON(w, http.StatusOK, reverifyJSON{cur, last})
}

// replayRequest is the body of POST /decisions/{request_id}/replay.
type replayRequest struct {
	Params        json.RawMessage   `json:"params"`
	SessionID     string            `json:"session_id"`
	PolicyVersion string            `json:"policy_version"`
	Provenance    []json.RawMessage `json:"provenance"`
}

func (a *API) replay(w http.ResponseWriter, r *http.Request) {
	req, err := a.decodeReplay(w, r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := replay.Replay(r.Context(), scopedFor(r, a.store), replay.Request{
		RequestID: httpapi.PathParam(r, "request_id"), SessionID: req.SessionID,
		Params: req.Params, Provenance: req.Provenance, PolicyVersion: req.PolicyVersion,
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, res)
}

// decodeReplay parses the body strictly: one JSON object (no duplicate
// members, valid UTF-8, nothing after it) with known members only.
func (a *API) decodeReplay(w http.ResponseWriter, r *http.Request) (*replayRequest, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.maxBody))
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
