package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/acsledger/acsledger/guardian/replay"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence"
)

// TestStatusFor: errors that carry their status keep it through wrapping,
// a body over its cap is 413 whatever else it is wrapped with, and the
// ledger's, evidence's and replay's sentinels get theirs.
func TestStatusFor(t *testing.T) {
	errOwn := NewError(http.StatusForbidden, "not yours")
	for _, c := range []struct {
		name string
		err  error
		want int
	}{
		{"own status", errOwn, 403},
		{"own status, wrapped", fmt.Errorf("session x: %w", errOwn), 403},
		{"bad request", fmt.Errorf("%w: query parameter limit=%q", ErrBadRequest, "x"), 400},
		{"too large, beside a bad request", fmt.Errorf("%w: %w", ErrBadRequest, &http.MaxBytesError{Limit: 1}), 413},
		{"token taken", ledger.ErrTokenExists, 409},
		{"run in progress", evidence.ErrRunning, 409},
		{"no log", evidence.ErrNoLog, 400},
		{"ambiguous request id", replay.ErrAmbiguous, 409},
		{"replay params mismatch", replay.ErrParamsMismatch, 422},
		{"invalid search", ledger.ErrInvalidSearch, 400},
		{"erased", fmt.Errorf("params: %w", ledger.ErrErased), 410},
		{"not found", fmt.Errorf("session %q: %w", "s", ledger.ErrNotFound), 404},
		{"writer mismatch", ledger.ErrWriterMismatch, 409},
		{"anything else", errors.New("disk on fire"), 500},
	} {
		if got := StatusFor(c.err); got != c.want {
			t.Errorf("%s: StatusFor(%v) = %d, want %d", c.name, c.err, got, c.want)
		}
	}
}
