package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/verify"
	"github.com/acsledger/acsledger/web/httpapi"
)

// DefaultMaxConcurrentVerifications bounds the uploaded bundles verified at
// once: each holds at most uploadLimits' worth of memory and a core.
const DefaultMaxConcurrentVerifications = 2

// errBusy answers an upload while every verification slot is taken.
var errBusy = httpapi.NewError(http.StatusServiceUnavailable, "too many bundles are being verified; retry later")

// retryAfterSeconds is the Retry-After of a busy answer.
const retryAfterSeconds = "2"

// uploadLimits bounds what verifying one uploaded bundle may hold, so that
// the server's memory does not grow with the upload, whoever sent it: a
// value as large as the largest entry the ledger accepts, plus room for
// its hashes (a policy bundle's content too: a larger one is verified
// offline with acsverify), responses held for their
// entries as in a bundle of 1,000 steps in the "responses" layout (a
// bundle the ledger exports holds none: it uses "steps"), and findings
// as the whole-ledger re-verification keeps them.
func (a *API) uploadLimits() verify.Limits {
	return verify.Limits{
		MaxValueBytes:    int(a.maxBody) + 64<<10,
		MaxHeldResponses: 1000,
		MaxElements:      1000,
		MaxFindings:      evidence.MaxFailedListed * evidence.MaxFindingsPerSession,
	}
}

// verifyBundle verifies an uploaded bundle against the server's trust, as
// it arrives: the body is read as a stream, never whole, within
// uploadLimits, and at most MaxConcurrentVerifications at once. The
// verdict is 200 either way; a bundle that cannot be read, or needs more
// than the limits, is 400.
func (a *API) verifyBundle(w http.ResponseWriter, r *http.Request) {
	select {
	case a.verifying <- struct{}{}:
		defer func() { <-a.verifying }()
	default:
		httpapi.RefuseUnread(w, r)
		w.Header().Set("Retry-After", retryAfterSeconds)
		a.fail(w, r, errBusy)
		return
	}
	body := http.MaxBytesReader(w, r.Body, a.opts.MaxBundleBytes)
	rep, err := verify.VerifyBundleLimited(body, a.Trust(), a.uploadLimits())
	if err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			a.fail(w, r, fmt.Errorf("the bundle is larger than %d bytes: %w", a.opts.MaxBundleBytes, err))
			return
		}
		var in *verify.InputError
		if errors.As(err, &in) {
			a.fail(w, r, fmt.Errorf("%w: %v", errMalformedBundle, err))
			return
		}
		a.fail(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, evidence.NewReport(rep))
}
