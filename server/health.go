package server

import (
	"context"
	"net/http"
	"time"
)

// healthz answers 200 when the database answers, 503 when it does not, and says
// whether this process leads the engine.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	body := map[string]any{"status": "ok", "database": "ok", "driver": s.drv.Name()}
	if s.cfg.IsLeader != nil {
		body["leader"] = s.cfg.IsLeader()
	}
	status := http.StatusOK
	if err := s.drv.Ping(ctx); err != nil {
		s.log.Warn("health check: database unreachable", "err", err)
		body["status"], body["database"] = "unavailable", "unreachable"
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, body)
	return nil
}
