package server

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// metrics holds the server's Prometheus collectors in a registry of its own, so
// two servers in one process (tests) do not collide.
type metrics struct {
	reg         *prometheus.Registry
	claims      *prometheus.CounterVec
	completions *prometheus.CounterVec
	leaseLosses prometheus.Counter
	handler     *prometheus.HistogramVec
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	handlerHTTP http.Handler
}

func newMetrics(drv driver.Driver) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.claims = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "drover_claims_total",
		Help: "Jobs claimed and handed to a worker, by queue: once each, not again for a replayed claim, nor for a claim given back because its worker had left.",
	}, []string{"queue"})
	m.completions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "drover_completions_total",
		Help: "Reported outcomes, by queue and outcome (succeeded, retried, failed, snoozed; canceled: an embedded worker's handler stopped by a cancel).",
	}, []string{"queue", "outcome"})
	m.leaseLosses = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "drover_lease_lost_total", Help: "Heartbeats and reports rejected because the lease was lost (a canceled job's are not).",
	})
	m.handler = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "drover_handler_duration_seconds", Help: "Time from start to reported outcome, by kind and outcome.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
	}, []string{"kind", "outcome"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "drover_http_requests_total", Help: "HTTP requests, by route and status code (499: the client left before its answer).",
	}, []string{"route", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "drover_http_request_duration_seconds", Help: "HTTP request latency, by route.",
		// The default buckets end at 10 s; a task-claim long poll waits up to
		// MaxWait (60 s by default), and each of those landed in +Inf.
		Buckets: append(slices.Clone(prometheus.DefBuckets), 30, 60, 120),
	}, []string{"route"})
	// The default queue's series exist from the start, at 0, so that a fresh
	// server's /metrics has every family a dashboard or an alert names (a
	// counter vector shows none until its first labels), and a rate over the
	// first claims starts from 0 rather than from the first sample.
	m.claims.WithLabelValues(drover.DefaultQueue)
	for _, o := range outcomes {
		m.completions.WithLabelValues(drover.DefaultQueue, o)
	}
	m.reg.MustRegister(m.claims, m.completions, m.leaseLosses, m.handler, m.requests, m.latency,
		&jobsCollector{drv: drv}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// A collector that fails (the job counts, while the database is down)
	// leaves the others to be served: the in-process counters matter most
	// then. Its error is not served either, as it may name the database.
	m.handlerHTTP = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return m
}

// outcomes are drover_completions_total's outcome labels.
var outcomes = []string{"succeeded", "retried", "failed", "snoozed", "canceled"}

func (m *metrics) request(route string, code int, took time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(route).Observe(took.Seconds())
}

func (m *metrics) claimed(queue string) { m.claims.WithLabelValues(queue).Inc() }
func (m *metrics) leaseLost()           { m.leaseLosses.Inc() }

// finished records a reported outcome and how long the job ran.
func (m *metrics) finished(j *drover.Job, status string, snoozed bool) {
	outcome := status
	switch {
	case snoozed:
		outcome = "snoozed"
	case j.Status == drover.StatusQueued:
		outcome = "retried"
	case j.Status == drover.StatusFailed:
		outcome = "failed"
	}
	m.completions.WithLabelValues(j.Queue, outcome).Inc()
	if took, ok := ranFor(j); ok {
		m.handler.WithLabelValues(j.Kind, outcome).Observe(took.Seconds())
	}
}

// ranFor is how long the job's last execution ran, from its started_at to
// the report, on the database's clock where the row has both ends
// (finished_at, or the error the report recorded), else from the server's
// clock; never below 0. The server's clock against the database's recorded
// the skew between them, negative durations when the database's ran ahead.
func ranFor(j *drover.Job) (time.Duration, bool) {
	if j.StartedAt == nil {
		return 0, false
	}
	end := time.Now()
	switch {
	case j.FinishedAt != nil:
		end = *j.FinishedAt
	case len(j.Errors) > 0 && j.Errors[len(j.Errors)-1].Attempt == j.Attempt:
		end = j.Errors[len(j.Errors)-1].At
	}
	return max(0, end.Sub(*j.StartedAt)), true
}

// Metrics lets an in-process worker report into the server's metrics: it is a
// drover.Observer (WorkerConfig.Observer).
type Metrics struct{ m *metrics }

var _ drover.Observer = (*Metrics)(nil)

// Claimed counts n jobs claimed from queue.
func (x *Metrics) Claimed(queue string, n int) { x.m.claims.WithLabelValues(queue).Add(float64(n)) }

// Finished records the outcome (succeeded, retried, failed, snoozed, or
// canceled while it ran) of a job that ran for took.
func (x *Metrics) Finished(j *drover.Job, outcome string, took time.Duration) {
	x.m.completions.WithLabelValues(j.Queue, outcome).Inc()
	x.m.handler.WithLabelValues(j.Kind, outcome).Observe(took.Seconds())
}

// LeaseLost counts a job the worker lost.
func (x *Metrics) LeaseLost(*drover.Job) { x.m.leaseLosses.Inc() }

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	s.metrics.handlerHTTP.ServeHTTP(w, r)
	return nil
}

// jobsCollector reports drover_jobs{queue,status} from the database at scrape time.
type jobsCollector struct{ drv driver.Driver }

var jobsDesc = prometheus.NewDesc("drover_jobs", "Jobs in the database, by queue and status.", []string{"queue", "status"}, nil)

func (c *jobsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- jobsDesc }

func (c *jobsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	qs, err := c.drv.QueueList(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(jobsDesc, err)
		return
	}
	// Every status of every queue, 0 included, and the default queue even
	// before its first job: a series that vanishes at 0 reads as "no data",
	// not as none waiting, and an alert on it never fires.
	if !slices.ContainsFunc(qs, func(q driver.QueueInfo) bool { return q.Name == drover.DefaultQueue }) {
		qs = append(qs, driver.QueueInfo{Name: drover.DefaultQueue})
	}
	for _, q := range qs {
		for _, st := range lifecycle.Statuses {
			ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(q.Counts[st]), q.Name, string(st))
		}
	}
}
