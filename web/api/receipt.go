package api

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/web/httpapi"
)

// ReceiptContentType is the media type of a receipt (docs/receipts.md):
// c2sp.org/tlog-proof text.
const ReceiptContentType = "text/plain; charset=utf-8"

// COSEReceiptContentType is the media type of a receipt's COSE form: a
// COSE_Sign1 (RFC 9052 §2).
const COSEReceiptContentType = `application/cose; cose-type="cose-sign1"`

// RetryAfter is how long a client asking for the receipt of an entry no
// checkpoint covers yet should wait: the log's batch delay (the longest an
// entry waits for integration), rounded up to whole seconds, at least 1.
func RetryAfter(log any) int {
	d := time.Second
	if l, ok := log.(interface{ BatchDelay() time.Duration }); ok && l.BatchDelay() > d {
		d = l.BatchDelay()
	}
	return int(math.Ceil(d.Seconds()))
}

// receipt serves GET /api/v1/sessions/{session_id}/entries/{position}/receipt:
// the entry's receipt (?format=cose: its COSE form), or 409 with Retry-After while no signed checkpoint
// covers it.
func (a *API) receipt(w http.ResponseWriter, r *http.Request) {
	id := httpapi.PathParam(r, "session_id")
	raw := httpapi.PathParam(r, "position")
	pos, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || pos < 0 {
		a.fail(w, r, fmt.Errorf("%w: position %q is not a non-negative integer", httpapi.ErrBadRequest, raw))
		return
	}
	build, ctype, ext := evidence.Receipt, ReceiptContentType, ".tlog-proof"
	switch f := r.URL.Query().Get("format"); f {
	case "", "tlog-proof":
	case "cose":
		build, ctype, ext = evidence.COSEReceipt, COSEReceiptContentType, ".cose"
	default:
		a.fail(w, r, fmt.Errorf("%w: format %q is neither tlog-proof (the default) nor cose", httpapi.ErrBadRequest, f))
		return
	}
	rl, _ := a.opts.Log.(evidence.ReceiptLog)
	doc, err := build(r.Context(), a.store, rl, id, pos)
	if errors.Is(err, evidence.ErrNotAnchored) {
		secs := RetryAfter(a.opts.Log)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		httpapi.WriteError(w, http.StatusConflict, fmt.Sprintf("%v; retry in %d s", err, secs))
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", ctype)
	name := strings.TrimSuffix(ReceiptFileName(id, pos), ".tlog-proof") + ext
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(doc)
}

// ReceiptFileName is the file name a receipt is saved under.
func ReceiptFileName(sessionID string, position int64) string {
	return fmt.Sprintf("receipt-%s-%d.tlog-proof", safeName(sessionID), position)
}
