package guardian

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// maxApprovalBytes caps an approval document.
const maxApprovalBytes = 64 << 10

// ApprovalHandler serves approvers' answers to ASK decisions (ACS §9): POST
// a signed approval (see ResolveAsk) as the body. The answer is JSON:
// {"decision", "chain_hash"} with status 200, or {"error"} with the status
// approvalStatus maps the failure to.
func (g *Guardian) ApprovalHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "approvals are submitted with POST", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxApprovalBytes))
		if err != nil {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "the approval could not be read or is larger than 64 KiB"})
			return
		}
		res, err := g.ResolveAsk(r.Context(), body)
		if err != nil {
			w.WriteHeader(approvalStatus(err))
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"decision": string(res.Decision), "chain_hash": res.ChainHash})
	})
}

// approvalStatus maps a ResolveAsk error to an HTTP status.
func approvalStatus(err error) int {
	switch {
	case errors.Is(err, ErrApprovalInvalid):
		return http.StatusBadRequest
	case errors.Is(err, ErrApprovalForged):
		return http.StatusUnauthorized
	case errors.Is(err, ErrApproverMismatch), errors.Is(err, ErrExtensionRefused):
		return http.StatusForbidden
	case errors.Is(err, ErrNoPendingAsk), errors.Is(err, ErrUnknownSession):
		return http.StatusNotFound
	case errors.Is(err, ErrSessionSealed):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}
