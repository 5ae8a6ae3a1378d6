package server

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
)

// firstClaim closes claimed once its first JobClaim has returned.
type firstClaim struct {
	driver.Driver
	once    sync.Once
	claimed chan struct{}
}

func (d *firstClaim) JobClaim(ctx context.Context, p driver.ClaimParams) ([]*driver.Job, error) {
	defer d.once.Do(func() { close(d.claimed) })
	return d.Driver.JobClaim(ctx, p)
}

// requestLog sends the route of each request wrap logs (its debug line, the
// last thing wrap does) on done.
type requestLog struct{ done chan string }

func (h *requestLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *requestLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *requestLog) WithGroup(string) slog.Handler            { return h }
func (h *requestLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "request" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "route" {
				h.done <- a.Value.String()
			}
			return true
		})
	}
	return nil
}

// A request whose client left before its answer is counted in
// drover_http_requests_total as 499 (client closed request, as nginx logs
// it), not as the 200 it never received: a long poll its worker gave up on,
// and a call whose database work was canceled with it, which wrote nothing.
func TestRequestWhoseClientLeftIsCountedAs499(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			d := &firstClaim{Driver: testdb.Open(t, kind), claimed: make(chan struct{})}
			c, err := drover.NewClient(d, nil)
			if err != nil {
				t.Fatal(err)
			}
			log := &requestLog{done: make(chan string, 16)}
			s := New(c, Config{Logger: slog.New(log)})
			t.Cleanup(s.Close)
			ctx, stop := context.WithCancel(context.Background())
			addr, served := make(chan net.Addr, 1), make(chan error, 1)
			go func() {
				served <- ListenAndServe(ctx, s, ListenConfig{Addr: "127.0.0.1:0", Ready: func(a net.Addr) { addr <- a }}, nil)
			}()
			t.Cleanup(func() { stop(); <-served })
			base := "http://" + (<-addr).String()

			// A long poll on an empty queue, given up on by its worker.
			rctx, leave := context.WithCancel(context.Background())
			req, err := http.NewRequestWithContext(rctx, "POST", base+"/internal/task-claim",
				strings.NewReader(`{"worker_id":"w1","queues":["q"],"wait_seconds":30}`))
			if err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				errc <- err
			}()
			<-d.claimed // found nothing: the poll waits
			leave()
			<-errc
			if route := <-log.done; route != "POST /internal/task-claim" {
				t.Fatalf("logged %q first", route)
			}

			// A heartbeat whose client had left before the database was asked.
			gone, cancel := context.WithCancel(context.Background())
			cancel()
			hb := httptest.NewRequestWithContext(gone, "POST", "/internal/heartbeat",
				strings.NewReader(`{"task_id":1,"attempt":1,"lease_token":"00000000-0000-0000-0000-000000000001"}`))
			s.ServeHTTP(httptest.NewRecorder(), hb)
			<-log.done

			for _, series := range []string{
				`drover_http_requests_total{code="499",route="POST /internal/task-claim"}`,
				`drover_http_requests_total{code="499",route="POST /internal/heartbeat"}`,
			} {
				if got := metricValue(t, s, series); got != 1 {
					t.Errorf("%s = %v, want 1", series, got)
				}
			}
			for _, series := range []string{
				`drover_http_requests_total{code="200",route="POST /internal/task-claim"}`,
				`drover_http_requests_total{code="200",route="POST /internal/heartbeat"}`,
			} {
				if got := metricValue(t, s, series); got != -1 {
					t.Errorf("%s = %v, want none: no answer reached a client", series, got)
				}
			}
		})
	}
}
