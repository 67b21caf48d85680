package web

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/acsledger/acsledger/web/httpapi"
)

// readyTimeout bounds one readiness check, so that a database that hangs
// makes /readyz answer 503, not time out.
const readyTimeout = 2 * time.Second

// Ready is a readiness check: it returns nil while the service can record
// what it is asked to, and otherwise an error whose Component names what
// cannot be written.
type Ready func(ctx context.Context) error

// NotReadyError is what a Ready check returns when a component cannot be
// written: Component is shown on /readyz, Err only logged.
type NotReadyError struct {
	Component string // "store" or "log"
	Err       error
}

func (e *NotReadyError) Error() string { return e.Component + " cannot be written: " + e.Err.Error() }
func (e *NotReadyError) Unwrap() error { return e.Err }

// readyz answers 200 while Options.Ready passes and 503 while it fails.
// /healthz stays a liveness check (the process answers); /readyz tells a
// load balancer or orchestrator to send no traffic while decisions could
// not be recorded. The cause is logged, not shown: the route needs no
// credential.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.ready == nil {
		httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	err := s.ready(ctx)
	if err == nil {
		httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
		return
	}
	component := "unknown"
	var nr *NotReadyError
	if errors.As(err, &nr) {
		component = nr.Component
	}
	s.log.Warn("not ready", "component", component, "err", err)
	httpapi.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "component": component})
}
