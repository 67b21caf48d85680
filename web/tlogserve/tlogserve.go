// Package tlogserve serves the Merkle log over HTTP: the C2SP read paths
// (c2sp.org/tlog-tiles: /checkpoint, /tile/..., /tile/entries/...) and the
// proof API under /api/v1/proofs/.
//
// Handlers are thin: they parse, call ledger/tlog, and map its errors to
// statuses in one place ([writeError]).
//
// [tlog-tiles]: https://c2sp.org/tlog-tiles
// [tlog-proof]: https://c2sp.org/tlog-proof
package tlogserve

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/go-chi/chi/v5"
)

// Mount adds the log's routes to r. logger receives server-side failures
// (nil: discard).
func Mount(r chi.Router, l *tlog.Log, logger *slog.Logger) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &handler{l: l, log: logger}
	r.Get("/checkpoint", h.checkpoint)
	r.Get("/tile/*", h.tile)
	r.Get("/api/v1/proofs/entry/{session_id}/{position}", h.entryProof)
	r.Get("/api/v1/proofs/inclusion", h.inclusion)
	r.Get("/api/v1/proofs/consistency", h.consistency)
	r.Get("/api/v1/checkpoints/{size}", h.checkpointAt)
	r.Get("/api/v1/checkpoints/{size}/timestamp", h.timestamp)
}

// Handler returns a handler serving only the log's routes.
func Handler(l *tlog.Log, logger *slog.Logger) http.Handler {
	r := chi.NewRouter()
	Mount(r, l, logger)
	return r
}

type handler struct {
	l   *tlog.Log
	log *slog.Logger
}

// errBadRequest marks malformed request input.
var errBadRequest = errors.New("bad request")

// writeError is the one place where log errors become HTTP statuses.
func (h *handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, errBadRequest), errors.Is(err, tlog.ErrBadTilePath), errors.Is(err, tlog.ErrBadRange):
		status = http.StatusBadRequest
	case errors.Is(err, tlog.ErrNotFound):
		status = http.StatusNotFound
	}
	msg := err.Error()
	if status == http.StatusInternalServerError {
		h.log.Error("merkle log request failed", "path", r.URL.Path, "err", err)
		msg = "internal error"
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	fmt.Fprintln(w, msg)
}

func (h *handler) checkpoint(w http.ResponseWriter, r *http.Request) {
	cp, err := h.l.Checkpoint(r.Context())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(cp)
}

// pathSize reads the {size} path segment: a decimal tree size.
func pathSize(r *http.Request) (uint64, error) {
	s := chi.URLParam(r, "size")
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%w: size %q is not a decimal tree size", errBadRequest, s)
	}
	return v, nil
}

// checkpointAt serves the checkpoint signed at a size, with its stored
// cosignatures: what a time-stamp of that size stamps. Witnesses may still
// add cosignatures, so it is not cached.
func (h *handler) checkpointAt(w http.ResponseWriter, r *http.Request) {
	h.serveAtSize(w, r, h.l.CheckpointAt, "text/plain; charset=utf-8", "no-cache")
}

// timestamp serves the RFC 3161 TimeStampResp of the checkpoint signed at
// a size (RFC 3161 §4: application/timestamp-reply), 404 while it has none.
// A stored time-stamp is written once and never changes.
func (h *handler) timestamp(w http.ResponseWriter, r *http.Request) {
	h.serveAtSize(w, r, h.l.Timestamp, "application/timestamp-reply", "public, max-age=31536000, immutable")
}

// serveAtSize answers with what get returns for the request's {size}.
func (h *handler) serveAtSize(w http.ResponseWriter, r *http.Request, get func(context.Context, uint64) ([]byte, error), contentType, cacheControl string) {
	size, err := pathSize(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	b, err := get(r.Context(), size)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", cacheControl)
	w.Write(b)
}

func (h *handler) tile(w http.ResponseWriter, r *http.Request) {
	level, n, width, err := tlog.ParseTilePath(strings.TrimPrefix(r.URL.Path, "/"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	data, err := h.l.Tile(r.Context(), level, n, width)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if width == tlog.TileWidth {
		// tlog-tiles: a full tile never changes.
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		// A partial tile of a given width never changes either, but it
		// may stop being served once the full tile exists.
		w.Header().Set("Cache-Control", "public, max-age=60")
	}
	w.Write(data)
}

func (h *handler) entryProof(w http.ResponseWriter, r *http.Request) {
	session, err := url.PathUnescape(chi.URLParam(r, "session_id"))
	if err != nil {
		h.writeError(w, r, fmt.Errorf("%w: session_id is not a valid escaped path segment", errBadRequest))
		return
	}
	pos, err := strconv.ParseInt(chi.URLParam(r, "position"), 10, 64)
	if err != nil || pos < 0 {
		h.writeError(w, r, fmt.Errorf("%w: position %q is not a non-negative integer", errBadRequest, chi.URLParam(r, "position")))
		return
	}
	doc, _, err := h.l.EntryProof(r.Context(), session, pos)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(doc)
}

// sizeParam reads a decimal tree size; def is returned when it is absent.
func sizeParam(r *http.Request, name string, def uint64, required bool) (uint64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		if required {
			return 0, fmt.Errorf("%w: missing query parameter %q", errBadRequest, name)
		}
		return def, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%w: %s=%q is not a decimal size", errBadRequest, name, s)
	}
	return v, nil
}

// InclusionResponse is the JSON body of GET /api/v1/proofs/inclusion.
type InclusionResponse struct {
	LeafIndex uint64   `json:"leaf_index"`
	TreeSize  uint64   `json:"tree_size"`
	Proof     []string `json:"proof"` // base64 hashes, RFC 6962 §2.1.1 order
}

// ConsistencyResponse is the JSON body of GET /api/v1/proofs/consistency.
type ConsistencyResponse struct {
	OldSize uint64   `json:"old_size"`
	NewSize uint64   `json:"new_size"`
	Proof   []string `json:"proof"` // base64 hashes, RFC 6962 §2.1.2 order
}

// inclusion serves ?entry_hash=<64 hex>&tree_size=N (tree_size defaults to
// the latest checkpoint).
func (h *handler) inclusion(w http.ResponseWriter, r *http.Request) {
	raw := r.URL.Query().Get("entry_hash")
	eh, err := hex.DecodeString(raw)
	if err != nil || len(eh) != tlog.HashSize || strings.ToLower(raw) != raw {
		h.writeError(w, r, fmt.Errorf("%w: entry_hash=%q is not 64 lowercase hex digits", errBadRequest, raw))
		return
	}
	latest, err := h.latestSize(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	size, err := sizeParam(r, "tree_size", latest, false)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	idx, err := h.l.LeafIndexByEntryHash(r.Context(), [tlog.HashSize]byte(eh))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	p, err := h.l.InclusionProof(r.Context(), idx, size)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, InclusionResponse{LeafIndex: idx, TreeSize: size, Proof: encodeHashes(p)})
}

// consistency serves ?old=A&new=B (new defaults to the latest checkpoint).
func (h *handler) consistency(w http.ResponseWriter, r *http.Request) {
	latest, err := h.latestSize(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	oldSize, err := sizeParam(r, "old", 0, true)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	newSize, err := sizeParam(r, "new", latest, false)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if oldSize > newSize {
		h.writeError(w, r, fmt.Errorf("%w: old size %d is larger than new size %d", errBadRequest, oldSize, newSize))
		return
	}
	p, err := h.l.ConsistencyProof(r.Context(), oldSize, newSize)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, ConsistencyResponse{OldSize: oldSize, NewSize: newSize, Proof: encodeHashes(p)})
}

func (h *handler) latestSize(r *http.Request) (uint64, error) {
	cp, err := h.l.LatestCheckpoint(r.Context())
	if err != nil {
		return 0, err
	}
	return cp.Size, nil
}

func encodeHashes(p [][]byte) []string {
	out := make([]string, len(p))
	for i, h := range p {
		out[i] = base64.StdEncoding.EncodeToString(h)
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	json.NewEncoder(w).Encode(v)
}
