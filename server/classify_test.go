package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/drover-dev/drover/driver"
)

// TestClassifyUnavailable: a database that cannot be reached is a 503 the client
// may retry, never a 500; real faults stay 500 and say nothing about internals.
func TestClassifyUnavailable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"admin shutdown", fmt.Errorf("claim: %w", &pgconn.PgError{Code: "57P01"}), http.StatusServiceUnavailable},
		{"cannot connect now", &pgconn.PgError{Code: "57P03"}, http.StatusServiceUnavailable},
		{"connection exception", &pgconn.PgError{Code: "08006"}, http.StatusServiceUnavailable},
		{"dial refused", fmt.Errorf("get job: %w", &net.OpError{Op: "dial", Err: errors.New("connection refused")}), http.StatusServiceUnavailable},
		{"cut mid-answer", fmt.Errorf("list: %w", io.ErrUnexpectedEOF), http.StatusServiceUnavailable},
		{"deadline", context.DeadlineExceeded, http.StatusServiceUnavailable},
		{"constraint bug", &pgconn.PgError{Code: "23514"}, http.StatusInternalServerError},
		{"lease lost", fmt.Errorf("x: %w", driver.ErrLeaseLost), http.StatusConflict},
	}
	for _, tt := range tests {
		got := classify(tt.err)
		if got.status != tt.want {
			t.Errorf("%s: status %d (%s), want %d", tt.name, got.status, got.code, tt.want)
		}
		if got.status == http.StatusInternalServerError && got.message != "internal error" {
			t.Errorf("%s: 500 says %q; internals must not leak", tt.name, got.message)
		}
	}
}
