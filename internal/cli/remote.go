package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
	"github.com/drover-dev/drover/server"
)

// api is what the jobs and dlq commands need; localAPI provides it over the
// database and remoteAPI over a server's HTTP API.
type api interface {
	Enqueue(ctx context.Context, kind string, args any, opts *drover.EnqueueOpts) (*drover.EnqueueResult, error)
	// List and DLQList answer a page of jobs and whether more follow it.
	List(ctx context.Context, p drover.ListParams) ([]*drover.Job, bool, error)
	Get(ctx context.Context, id int64) (*drover.Job, error)
	Events(ctx context.Context, id int64) ([]lifecycle.Event, error)
	Cancel(ctx context.Context, id int64) (*drover.Job, error)
	DLQList(ctx context.Context, queue string, afterID int64, limit int) ([]*drover.Job, bool, error)
	DLQRequeue(ctx context.Context, id int64) (*drover.Job, error)
	DLQPurge(ctx context.Context, queue string) (int, error)
}

var _ api = localAPI{}

// localAPI is the api over the database: a Client whose listings are pages
// as the HTTP API answers them, of at most limit jobs and, past the first,
// server.DefaultMaxPageBytes of args, metadata, results and errors, with
// whether more follow. A listing of a thousand jobs of 1 MiB args was a
// gigabyte in the command's memory, and a page the bound cut short, read as
// "fewer than limit", said there were no more.
type localAPI struct{ *drover.Client }

func (l localAPI) List(ctx context.Context, p drover.ListParams) ([]*drover.Job, bool, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = driver.DefaultListLimit
	}
	p.Limit, p.MaxBytes = limit+1, server.DefaultMaxPageBytes
	jobs, err := l.Client.List(ctx, p)
	if err != nil {
		return nil, false, err
	}
	n := driver.PageFit(jobs, limit, p.MaxBytes)
	return jobs[:n], n < len(jobs), nil
}

func (l localAPI) DLQList(ctx context.Context, queue string, afterID int64, limit int) ([]*drover.Job, bool, error) {
	return l.List(ctx, drover.ListParams{Statuses: []lifecycle.Status{lifecycle.StatusFailed}, Queue: queue, AfterID: afterID, Limit: limit})
}

// remoteAPI talks to `drover server` so operators need no database access.
type remoteAPI struct {
	base  *url.URL
	token string
	http  *http.Client
}

func newRemoteAPI(server, token string, transport http.RoundTripper) (*remoteAPI, error) {
	u, err := url.Parse(strings.TrimRight(server, "/"))
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		shown := server
		if at := strings.LastIndex(server, "@"); at >= 0 { // what is before it may be a password
			shown = "…" + server[at:]
		}
		return nil, driver.Invalid("server", "%q is not an http(s) URL (e.g. http://127.0.0.1:7420)", shown)
	case u.User != nil:
		// Refused, as drover worker --server refuses it: every error about
		// the server would print the URL, password and all.
		// All of the user info is hidden: a user alone is a token to some
		// servers, and url.Redacted keeps it.
		shown := *u
		shown.User = url.User("xxxxx")
		return nil, driver.Invalid("server", "%q: pass credentials as a token (--token), not in the URL", shown.String())
	case u.RawQuery != "" || u.Fragment != "":
		return nil, driver.Invalid("server", "%q: give the base URL, without a query or fragment", server)
	}
	return &remoteAPI{base: u, token: token, http: &http.Client{Timeout: 60 * time.Second, CheckRedirect: noRedirects, Transport: transport}}, nil
}

// noRedirects answers a redirect instead of following it (do refuses it): a
// 301 or 302 would be followed with a GET, which turned an enqueue into a
// list that read as a job with id 0 and a purge into a list that read as
// "purged 0".
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// remoteError is an error answered by the server; it unwraps to the sentinel its
// code stands for, so errors.Is works as with the local client.
type remoteError struct {
	Status  int
	Code    string
	Message string
}

func (e *remoteError) Error() string { return e.Message }

func (e *remoteError) Unwrap() error {
	switch e.Code {
	case "invalid_argument", "payload_too_large":
		return driver.ErrInvalidArgument
	case "not_found":
		return driver.ErrNotFound
	case "lease_lost":
		return driver.ErrLeaseLost
	case "invalid_transition":
		return driver.ErrInvalidTransition
	}
	return nil
}

// do sends a request and decodes a 2xx answer into out; it returns the status.
func (r *remoteAPI) do(ctx context.Context, method, path string, query url.Values, body, out any) (int, error) {
	u := *r.base
	u.Path += path
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("server %s: %w", r.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		to := resp.Header.Get("Location")
		if loc, err := resp.Location(); err == nil {
			loc.Path = strings.TrimSuffix(loc.Path, path)
			loc.RawPath, loc.RawQuery = "", ""
			to = loc.String()
		}
		return resp.StatusCode, driver.Invalid("server", "%s %s answered %s, a redirect to %s: give the server's own URL as --server (nothing was done)",
			method, path, resp.Status, to)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("server %s: read answer: %w", r.base, err)
	}
	if len(data) > maxAnswerBytes {
		// Cut short, it failed to decode as "unexpected end of JSON input".
		hint := "" // one job's answer (jobs show) has no fewer to ask for
		if path == "/jobs" || path == "/dlq" {
			hint = "; ask for fewer jobs (--limit)"
		}
		return resp.StatusCode, fmt.Errorf("server %s: %s %s: the answer is over %d MiB%s",
			r.base, method, path, maxAnswerBytes>>20, hint)
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(data, &e) != nil || e.Error.Message == "" {
			return resp.StatusCode, fmt.Errorf("server %s: %s %s: HTTP %d%s", r.base, method, path, resp.StatusCode, notDrover(r.base, data))
		}
		return resp.StatusCode, &remoteError{resp.StatusCode, e.Error.Code, e.Error.Message}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("server %s: decode answer: %w", r.base, err)
		}
	}
	return resp.StatusCode, nil
}

// notDrover says what answered, when an error answer is not a drover
// server's: the first line of its body, and what to do where Go's TLS server
// answered an http:// request (an https port given as http://).
func notDrover(base *url.URL, body []byte) string {
	line, _, _ := bytes.Cut(bytes.TrimSpace(body), []byte("\n"))
	if len(line) == 0 {
		return " with no body (not a drover server's answer)"
	}
	text := strings.ToValidUTF8(string(line), "?")
	if r := []rune(text); len(r) > 200 {
		text = string(r[:200]) + "…"
	}
	msg := fmt.Sprintf(": %q (not a drover server's answer)", text)
	if base.Scheme == "http" && strings.Contains(text, "HTTP request to an HTTPS server") {
		msg += fmt.Sprintf("; the server speaks TLS: give --server https://%s", base.Host)
	}
	return msg
}

// maxAnswerBytes bounds what the command reads of one answer: a list of
// jobs each with a megabyte of args is that much.
const maxAnswerBytes = 64 << 20

func (r *remoteAPI) Enqueue(ctx context.Context, kind string, args any, o *drover.EnqueueOpts) (*drover.EnqueueResult, error) {
	body := map[string]any{"kind": kind}
	if args != nil {
		body["args"] = args
	}
	if o != nil {
		if o.Queue != "" {
			body["queue"] = o.Queue
		}
		if o.Priority != 0 {
			body["priority"] = o.Priority
		}
		if !o.RunAt.IsZero() {
			body["run_at"] = o.RunAt.Format(time.RFC3339Nano)
		}
		if o.MaxAttempts != 0 {
			body["max_attempts"] = o.MaxAttempts
		}
		if o.Timeout != 0 {
			body["timeout_seconds"] = o.Timeout.Seconds()
		}
		if o.IdempotencyKey != "" {
			body["idempotency_key"] = o.IdempotencyKey
		}
		if o.Metadata != nil {
			body["metadata"] = o.Metadata
		}
	}
	j, status, err := r.job(ctx, "POST", "/jobs", body)
	if err != nil {
		return nil, err
	}
	return &drover.EnqueueResult{Job: j, Existing: status == http.StatusOK}, nil
}

// job sends a call that answers a job, and refuses an answer of another shape
// (a proxy's 200 {}), which decoded as an empty job: the command printed
// "canceled job 0", exit 0, though nothing was canceled.
func (r *remoteAPI) job(ctx context.Context, method, path string, body any) (*drover.Job, int, error) {
	var j drover.Job
	status, err := r.do(ctx, method, path, nil, body, &j)
	if err != nil {
		return nil, status, err
	}
	if j.ID < 1 {
		return nil, status, fmt.Errorf("server %s: %s %s answered %d without a job", r.base, method, path, status)
	}
	return &j, status, nil
}

type page struct {
	Jobs       []*drover.Job `json:"jobs"`
	NextCursor *string       `json:"next_cursor"`
}

func listQuery(statuses []lifecycle.Status, queue, kind string, after int64, limit int) url.Values {
	q := url.Values{}
	var ss []string
	for _, s := range statuses {
		ss = append(ss, string(s))
	}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("status", strings.Join(ss, ","))
	set("queue", queue)
	set("kind", kind)
	if after > 0 {
		q.Set("cursor", strconv.FormatInt(after, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return q
}

func (r *remoteAPI) List(ctx context.Context, p drover.ListParams) ([]*drover.Job, bool, error) {
	return r.list(ctx, "/jobs", listQuery(p.Statuses, p.Queue, p.Kind, p.AfterID, p.Limit))
}

// list reads a page of jobs, and refuses an answer without its list (a
// proxy's 200 {}, or "jobs": null; a server answers [] for none), which read
// as an empty page: "no jobs" printed, exit 0, whatever the server held.
// The second answer is whether the page has a next_cursor.
func (r *remoteAPI) list(ctx context.Context, path string, q url.Values) ([]*drover.Job, bool, error) {
	var out page
	status, err := r.do(ctx, "GET", path, q, nil, &out)
	if err == nil && out.Jobs == nil {
		err = fmt.Errorf("server %s: GET %s answered %d without a jobs list", r.base, path, status)
	}
	if err == nil && out.NextCursor != nil && len(out.Jobs) == 0 {
		err = fmt.Errorf("server %s: GET %s answered %d with a next_cursor and no jobs", r.base, path, status)
	}
	return out.Jobs, out.NextCursor != nil, err
}

func (r *remoteAPI) Get(ctx context.Context, id int64) (*drover.Job, error) {
	j, _, err := r.job(ctx, "GET", fmt.Sprintf("/jobs/%d", id), nil)
	return j, err
}

func (r *remoteAPI) Events(ctx context.Context, id int64) ([]lifecycle.Event, error) {
	var out struct {
		Events []lifecycle.Event `json:"events"`
	}
	path := fmt.Sprintf("/jobs/%d/events", id)
	status, err := r.do(ctx, "GET", path, nil, nil, &out)
	if err == nil && out.Events == nil { // as list: a server answers [] for none
		err = fmt.Errorf("server %s: GET %s answered %d without an events list", r.base, path, status)
	}
	return out.Events, err
}

func (r *remoteAPI) Cancel(ctx context.Context, id int64) (*drover.Job, error) {
	j, _, err := r.job(ctx, "POST", fmt.Sprintf("/jobs/%d/cancel", id), nil)
	return j, err
}

func (r *remoteAPI) DLQList(ctx context.Context, queue string, afterID int64, limit int) ([]*drover.Job, bool, error) {
	return r.list(ctx, "/dlq", listQuery(nil, queue, "", afterID, limit))
}

func (r *remoteAPI) DLQRequeue(ctx context.Context, id int64) (*drover.Job, error) {
	j, code, err := r.job(ctx, "POST", fmt.Sprintf("/dlq/%d/requeue", id), nil)
	if err != nil {
		return nil, err
	}
	j.Replayed = code == http.StatusOK // 201 for a new job; 200 for an earlier requeue's
	return j, nil
}

func (r *remoteAPI) DLQPurge(ctx context.Context, queue string) (int, error) {
	var out struct {
		Purged *int `json:"purged"` // a pointer: an answer without it is no purge's
	}
	q := url.Values{}
	if queue != "" {
		q.Set("queue", queue)
	}
	status, err := r.do(ctx, "DELETE", "/dlq", q, nil, &out)
	if err != nil {
		return 0, err
	}
	if out.Purged == nil { // a proxy's 200 {} read as "purged 0 failed jobs"
		return 0, fmt.Errorf("server %s: DELETE /dlq answered %d without the count purged", r.base, status)
	}
	return *out.Purged, nil
}

// isUserError reports errors that are the caller's input (exit status 2).
func isUserError(err error) bool {
	var ve *driver.ValidationError
	return errors.As(err, &ve) || errors.Is(err, errUsage) || errors.Is(err, driver.ErrInvalidArgument)
}
