package server

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// enqueueRequest is the body of POST /jobs. Pointers tell an absent field (the
// default applies) from an explicit one (which must be valid).
type enqueueRequest struct {
	Kind           *string         `json:"kind"`
	Args           json.RawMessage `json:"args"`
	Queue          *string         `json:"queue"`
	Priority       *int            `json:"priority"`
	RunAt          *string         `json:"run_at"`
	MaxAttempts    *int            `json:"max_attempts"`
	TimeoutSeconds *float64        `json:"timeout_seconds"`
	IdempotencyKey *string         `json:"idempotency_key"`
	Metadata       json.RawMessage `json:"metadata"`
}

// toParams checks what only the HTTP layer can see (explicit empty values) and
// leaves the rest to the client's validation, so the rules live in one place.
func (q *enqueueRequest) toParams() (drover.EnqueueParams, error) {
	if q.Kind == nil {
		return drover.EnqueueParams{}, driver.Invalid("kind", "is required")
	}
	o := &drover.EnqueueOpts{}
	if q.Queue != nil {
		if *q.Queue == "" {
			return drover.EnqueueParams{}, driver.Invalid("queue", "must not be empty (leave it out for %q)", drover.DefaultQueue)
		}
		o.Queue = *q.Queue
	}
	if q.Priority != nil {
		if *q.Priority < 0 {
			return drover.EnqueueParams{}, driver.Invalid("priority", "%d is negative; 0 is the highest priority", *q.Priority)
		}
		if *q.Priority > maxInt32 {
			return drover.EnqueueParams{}, driver.Invalid("priority", "%d, at most %d", *q.Priority, maxInt32)
		}
		o.Priority = *q.Priority
	}
	if q.MaxAttempts != nil {
		if *q.MaxAttempts < 1 || *q.MaxAttempts > maxInt32 {
			return drover.EnqueueParams{}, driver.Invalid("max_attempts", "%d, must be 1 to %d", *q.MaxAttempts, maxInt32)
		}
		o.MaxAttempts = *q.MaxAttempts
	}
	if q.TimeoutSeconds != nil {
		t := *q.TimeoutSeconds
		if t < 0.001 || math.IsNaN(t) || t > driver.MaxTimeout.Seconds() {
			return drover.EnqueueParams{}, driver.Invalid("timeout_seconds", "%v, must be 0.001 (a millisecond, the resolution) to a year", t)
		}
		// A millisecond is the resolution: 0.0015 is refused rather than cut to
		// 1 ms, and 0.3 (0.29999… in binary) is 300 ms, as is 1.1179999999999999
		// (Go's Duration.Seconds of 1118 ms). Binary rounding is a few units in
		// the last place of t; a tolerance of a millionth of the value let
		// 600.0004 pass as 600 s, and 31622399.9995 as a year.
		ms := math.Round(t * 1000)
		if ulp := math.Nextafter(t, math.Inf(1)) - t; math.Abs(t-ms/1000) > 4*ulp {
			return drover.EnqueueParams{}, driver.Invalid("timeout_seconds", "%v is not a whole number of milliseconds (the resolution)", t)
		}
		o.Timeout = time.Duration(ms) * time.Millisecond
	}
	if q.RunAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *q.RunAt)
		if err != nil {
			return drover.EnqueueParams{}, driver.Invalid("run_at", "%q is not an RFC 3339 time (e.g. 2030-01-01T09:00:00Z)", *q.RunAt)
		}
		if t.IsZero() { // the library's "not set": refused as the years around it are
			return drover.EnqueueParams{}, driver.Invalid("run_at", "%s is out of range", t.Format(time.RFC3339))
		}
		o.RunAt = t
	}
	if q.IdempotencyKey != nil {
		if *q.IdempotencyKey == "" {
			return drover.EnqueueParams{}, driver.Invalid("idempotency_key", "must not be empty (leave it out for none)")
		}
		o.IdempotencyKey = *q.IdempotencyKey
	}
	if err := checkJSON("args", q.Args); err != nil {
		return drover.EnqueueParams{}, err
	}
	if err := checkJSON("metadata", q.Metadata); err != nil {
		return drover.EnqueueParams{}, err
	}
	if len(q.Metadata) > 0 && string(q.Metadata) != "null" {
		o.Metadata = q.Metadata
	}
	var args any
	if len(q.Args) > 0 && string(q.Args) != "null" {
		args = q.Args
	}
	return drover.EnqueueParams{Kind: *q.Kind, Args: args, Opts: o}, nil
}

func (s *Server) enqueue(w http.ResponseWriter, r *http.Request) error {
	if err := noQuery(r); err != nil {
		return err
	}
	var req enqueueRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	p, err := req.toParams()
	if err != nil {
		return err
	}
	res, err := s.client.Enqueue(r.Context(), p.Kind, p.Args, p.Opts)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if res.Existing {
		status = http.StatusOK
	}
	w.Header().Set("Location", fmt.Sprintf("/jobs/%d", res.Job.ID))
	markReplayed(w, res.Existing)
	writeJSON(w, status, res.Job)
	return nil
}

// jobList is the answer of the list endpoints. next_cursor, when set, fetches the
// next page (older jobs).
type jobList struct {
	Jobs       []*drover.Job `json:"jobs"`
	NextCursor *string       `json:"next_cursor"`
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) error {
	p, err := listParams(r, true)
	if err != nil {
		return err
	}
	jobs, err := s.listPage(r, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, jobs)
	return nil
}

func (s *Server) listDLQ(w http.ResponseWriter, r *http.Request) error {
	if _, ok := r.URL.Query()["status"]; ok {
		return driver.Invalid("status", "the DLQ holds failed jobs only; leave status out")
	}
	p, err := listParams(r, false)
	if err != nil {
		return err
	}
	p.Statuses = []lifecycle.Status{lifecycle.StatusFailed}
	jobs, err := s.listPage(r, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, jobs)
	return nil
}

// listPage reads a page of p.Limit jobs, and one job more: next_cursor is
// null on the last page (openapi.json), also when its jobs fill it exactly. A
// page of exactly Limit jobs answered a cursor to an empty page, which a client
// paging until next_cursor is null had to ask for too.
//
// A page also ends where its jobs' args, metadata, results and errors would
// weigh more than MaxPageBytes (the first job always makes it), with a
// next_cursor to the rest: a thousand jobs of 1 MiB args were read, held and
// encoded whole, a gigabyte for one request.
func (s *Server) listPage(r *http.Request, p driver.ListParams) (jobList, error) {
	limit := p.Limit
	p.Limit++
	p.MaxBytes = s.cfg.MaxPageBytes
	jobs, err := s.client.List(r.Context(), p)
	if err != nil {
		return jobList{}, err
	}
	out := jobList{Jobs: jobs}
	if n := driver.PageFit(jobs, limit, p.MaxBytes); n < len(jobs) {
		out.Jobs = jobs[:n]
		c := strconv.FormatInt(out.Jobs[n-1].ID, 10)
		out.NextCursor = &c
	}
	if out.Jobs == nil {
		out.Jobs = []*drover.Job{}
	}
	return out, nil
}

// listParams reads ?status=a,b&queue=&kind=&limit=&cursor= (without status
// unless statuses). status may also be repeated (?status=a&status=b); the
// others are refused when repeated, as a second value would otherwise be
// dropped without a word.
func listParams(r *http.Request, statuses bool) (driver.ListParams, error) {
	var repeatable []string
	if statuses {
		repeatable = []string{"status"}
	}
	q, err := queryParams(r, repeatable, "queue", "kind", "limit", "cursor")
	if err != nil {
		return driver.ListParams{}, err
	}
	p := driver.ListParams{Queue: q.Get("queue"), Kind: q.Get("kind"), Limit: driver.DefaultListLimit}
	for _, s := range strings.Split(strings.Join(q["status"], ","), ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		st, err := lifecycle.ParseStatus(s)
		if err != nil {
			return p, driver.Invalid("status", "%v", err)
		}
		p.Statuses = append(p.Statuses, st)
	}
	if p.Queue != "" {
		if err := driver.ValidateName("queue", p.Queue); err != nil {
			return p, err
		}
	}
	if p.Kind != "" {
		if err := driver.ValidateName("kind", p.Kind); err != nil {
			return p, err
		}
	}
	if v := q.Get("limit"); v != "" {
		n, ok := positive(v)
		if !ok || n > 1000 {
			return p, driver.Invalid("limit", "%q, must be a whole number from 1 to 1000", v)
		}
		p.Limit = int(n)
	}
	if v := q.Get("cursor"); v != "" {
		n, ok := positive(v)
		if !ok {
			return p, driver.Invalid("cursor", "%q is not a cursor from next_cursor", v)
		}
		p.AfterID = n
	}
	return p, nil
}

// queryParams reads r's query string, refusing one that does not parse (a bad
// %-escape, a ';'), a parameter that is neither in repeatable nor in once, and
// one of once given more than once. URL.Query drops a pair it cannot parse and
// Get uses the first of several values, both without a word; and an unknown
// name (a typo: ?stauts=failed, or ?queu=payments on a purge, which would then
// delete every queue's failed jobs) would be ignored as if the filter had not
// been asked for.
func queryParams(r *http.Request, repeatable []string, once ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, driver.Invalid("query", "%q does not parse: %v", r.URL.RawQuery, err)
	}
	for _, name := range slices.Sorted(maps.Keys(q)) { // the same name in the error every time
		vs := q[name]
		switch {
		case slices.Contains(once, name):
			if len(vs) > 1 {
				return nil, driver.Invalid(name, "given %d times; give it once", len(vs))
			}
		case !slices.Contains(repeatable, name) && len(repeatable)+len(once) == 0:
			return nil, driver.Invalid(name, "is not a query parameter: this endpoint takes none")
		case !slices.Contains(repeatable, name):
			return nil, driver.Invalid(name, "is not a query parameter of this endpoint; it takes %s", strings.Join(append(slices.Clone(repeatable), once...), ", "))
		}
	}
	return q, nil
}

// noQuery refuses a query string on a call that changes state and takes its
// input in the body (or none): POST /jobs?queue=payments, ignored, enqueued
// into the default queue, and ?run_at= ran the job at once.
func noQuery(r *http.Request) error {
	if r.URL.RawQuery == "" {
		return nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return driver.Invalid("query", "%q does not parse: %v", r.URL.RawQuery, err)
	}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		return driver.Invalid(name, "is not a query parameter: this endpoint takes none (its input is the JSON body)")
	}
	return nil
}

func pathID(r *http.Request) (int64, error) {
	v := r.PathValue("id")
	id, ok := positive(v)
	if !ok {
		return 0, driver.Invalid("id", "%q is not a job id (a positive integer)", v)
	}
	return id, nil
}

// positive parses a positive decimal integer of digits alone: strconv also
// takes a sign ("+5"), which no id, cursor or limit is written with.
func positive(v string) (int64, bool) {
	if v == "" || strings.Trim(v, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil && n >= 1
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if _, err := queryParams(r, nil); err != nil {
		return err
	}
	j, err := s.client.Get(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, j)
	return nil
}

func (s *Server) jobEvents(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if _, err := queryParams(r, nil); err != nil { // ?limit= or ?type= filters nothing
		return err
	}
	if _, err := s.client.Get(r.Context(), id); err != nil {
		return err
	}
	evs, err := s.client.Events(r.Context(), id)
	if err != nil {
		return err
	}
	if evs == nil {
		evs = []lifecycle.Event{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": evs})
	return nil
}

// cancelJob cancels a job. Its optional body {"request_id": "…"} makes a
// repeat of the call (its answer was lost) answer the job again rather than
// 422 for a job already canceled, which looked the same as a job someone else
// canceled.
func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if err := noQuery(r); err != nil {
		return err
	}
	var req struct {
		RequestID *string `json:"request_id"`
	}
	if err := decodeOptional(r, &req); err != nil {
		return err
	}
	p := driver.CancelParams{ID: id, Actor: "operator"}
	if req.RequestID != nil {
		if err := checkRequestID(*req.RequestID); err != nil {
			return err
		}
		p.RequestID = *req.RequestID
	}
	j, err := s.drv.JobCancel(r.Context(), p)
	if err != nil {
		return err
	}
	markReplayed(w, j.Replayed)
	writeJSON(w, http.StatusOK, j)
	return nil
}

func (s *Server) requeueDLQ(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if err := noQuery(r); err != nil {
		return err
	}
	if err := decodeOptional(r, &struct{}{}); err != nil {
		return err
	}
	j, err := s.client.DLQRequeue(r.Context(), id)
	if err != nil {
		return err
	}
	w.Header().Set("Location", fmt.Sprintf("/jobs/%d", j.ID))
	status := http.StatusCreated
	if j.Replayed { // requeued before: the job that requeue created, as it is now
		status = http.StatusOK
	}
	markReplayed(w, j.Replayed)
	writeJSON(w, status, j)
	return nil
}

// purgeDLQ deletes failed jobs, of ?queue= or all; an extension beyond DESIGN §7
// so that `drover dlq purge` works through the server too.
func (s *Server) purgeDLQ(w http.ResponseWriter, r *http.Request) error {
	// A purge must not drop a second queue, or every queue, without a word.
	q, err := queryParams(r, nil, "queue")
	if err != nil {
		return err
	}
	if err := decodeOptional(r, &struct{}{}); err != nil {
		return err
	}
	queue := q.Get("queue")
	if _, given := q["queue"]; given {
		if err := driver.ValidateName("queue", queue); err != nil { // ?queue= is no queue, not every queue
			return err
		}
	}
	n, err := s.client.DLQPurge(r.Context(), queue)
	if err != nil && n > 0 {
		// SQLite purges in batches: those that committed stay purged, and
		// an answer of the error alone ("internal error") hid that the DLQ's
		// only record of those jobs was gone.
		return &partialError{err: err, done: fmt.Sprintf("%d failed jobs were purged before the error, the rest were not", n)}
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]int{"purged": n})
	return nil
}

func (s *Server) listQueues(w http.ResponseWriter, r *http.Request) error {
	// No filter is taken: ?queue=payments or ?paused=true answered every
	// queue, as if it had filtered them.
	if _, err := queryParams(r, nil); err != nil {
		return err
	}
	qs, err := s.client.Queues(r.Context())
	if err != nil {
		return err
	}
	if qs == nil {
		qs = []drover.QueueInfo{}
	}
	for _, q := range qs {
		for _, st := range lifecycle.Statuses {
			if _, ok := q.Counts[st]; !ok {
				q.Counts[st] = 0 // every status present, so clients need no defaults
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"queues": qs})
	return nil
}

func (s *Server) pauseQueue(w http.ResponseWriter, r *http.Request) error {
	return s.setPaused(w, r, true)
}

func (s *Server) resumeQueue(w http.ResponseWriter, r *http.Request) error {
	return s.setPaused(w, r, false)
}

func (s *Server) setPaused(w http.ResponseWriter, r *http.Request, paused bool) error {
	name := r.PathValue("name")
	if err := noQuery(r); err != nil {
		return err
	}
	if err := decodeOptional(r, &struct{}{}); err != nil {
		return err
	}
	var err error
	if paused {
		err = s.client.PauseQueue(r.Context(), name)
	} else {
		err = s.client.ResumeQueue(r.Context(), name)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": name, "paused": paused})
	return nil
}
