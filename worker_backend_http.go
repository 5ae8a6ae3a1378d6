package drover

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-dev/drover/driver"
)

// maxRemoteClaim is the largest limit a task-claim accepts.
const maxRemoteClaim = 100

// httpBackend runs a Worker through a Drover server's worker protocol. The server
// is the dispatcher: it claims and starts in one call, fences every report by
// (task_id, attempt, lease_token), computes retry backoff and decides between
// retry and DLQ. The backend only translates.
type httpBackend struct {
	base  string // server URL without a trailing slash
	token string
	hc    *http.Client
	wait  time.Duration // claim long-poll; 0: none
	w     *Worker
	// claimWithoutIDUntil: a server refused a claim's request_id as an unknown
	// field (it predates them), so claims go without one until this time
	// (unix nanoseconds; 0: never refused). Not for good: behind a load
	// balancer during a rolling upgrade the refusal was one old replica's,
	// and a claim without one costs a lease and an execution when its answer
	// is lost.
	claimWithoutIDUntil atomic.Int64
	// serverLease is the lease the server's last claim answer gave
	// (nanoseconds; 0: none yet), which bounds how long a lost claim is resent.
	serverLease atomic.Int64
}

func (b *httpBackend) start()         {}
func (b *httpBackend) stop()          { b.hc.CloseIdleConnections() }
func (b *httpBackend) longPoll() bool { return b.wait > 0 }

// completionWait: a remote worker's reports are sent as they come, each by
// its own job's goroutine.
func (b *httpBackend) completionWait() time.Duration { return 0 }

// tokenCheckFor bounds check's wait for the server's answer.
const tokenCheckFor = 5 * time.Second

// check asks the server whether it takes the worker's token, so that a worker
// started with a wrong one fails at Start, as a Temporal worker does, rather
// than run on claiming nothing, its only sign a log line. It sends an empty
// heartbeat, which changes nothing: the server checks the token before the
// body, so a token it refuses is answered 401 or 403, one it takes 400 (no
// task_id). Any other outcome (no answer, a 5xx: the server is down or
// restarting) is no refusal: the worker starts, and its claims are retried as
// ever.
func (b *httpBackend) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, tokenCheckFor)
	defer cancel()
	err := b.post(ctx, "/internal/heartbeat", struct{}{}, &struct{}{})
	if untrustedServer(err) {
		return fmt.Errorf("drover: the server at %s presented a certificate the worker does not trust (give its CA: --cacert, or RemoteConfig.HTTPClient's TLS RootCAs): %w", b.base, err)
	}
	if re := (*RemoteError)(nil); errors.As(err, &re) && errors.Is(err, ErrUnauthorized) {
		// Not the request's path: the heartbeat is only the question.
		return fmt.Errorf("drover: the server at %s refused the worker's token (%d %s: %s): %w",
			b.base, re.Status, re.Code, re.Message, ErrUnauthorized)
	}
	return nil
}

// wakeups: a queue's is the long poll of claim; the jobs canceled come from
// a long poll of task-cancels (watchCancels), each as its CanceledWakeup, as
// long as the claim's (RemoteConfig.WaitSeconds). A worker that does not
// long-poll (WaitSeconds < 0) asks for none: its handlers hear of a cancel
// at their next heartbeat.
func (b *httpBackend) wakeups(ctx context.Context) (<-chan string, error) {
	if b.wait <= 0 {
		return nil, nil
	}
	ch := make(chan string, 64)
	go b.watchCancels(ctx, ch)
	return ch, nil
}

// watchCancels long-polls the server's task-cancels until ctx ends, and sends
// the CanceledWakeup of each job it answers: the worker heartbeats a job it
// runs of those at once, and a canceled one's handler stops (runningJobs.poke).
// A server older than the endpoint (404, 405) is asked no more: its workers'
// handlers hear of a cancel at their next heartbeat, as before. A failure, or
// an empty answer within a second (a server shutting down; a proxy answering
// for it), is followed by a wait, doubled each time up to 30 s, so that a
// server that answers at once is not asked in a loop.
func (b *httpBackend) watchCancels(ctx context.Context, ch chan<- string) {
	defer close(ch)
	const path = "/internal/task-cancels"
	backoff := time.Second
	for ctx.Err() == nil {
		var resp struct {
			TaskIDs *[]int64 `json:"task_ids"`
		}
		sent := time.Now()
		rctx, cancel := context.WithTimeout(ctx, b.wait+b.w.cfg.LeaseDuration)
		err := b.post(rctx, path, struct {
			WaitSeconds float64 `json:"wait_seconds"`
		}{b.wait.Seconds()}, &resp)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if re := (*RemoteError)(nil); errors.As(err, &re) && (re.Status == http.StatusNotFound || re.Status == http.StatusMethodNotAllowed) {
			b.w.log.Info("the server does not send cancels (it predates them); a canceled job's handler stops at its next heartbeat",
				"status", re.Status)
			return
		}
		if err == nil && resp.TaskIDs == nil {
			err = fmt.Errorf("POST %s: the 200 answer has no task_ids: not a server's answer", path)
		}
		if err == nil {
			for _, id := range *resp.TaskIDs {
				select {
				case ch <- driver.CanceledWakeup(id):
				default: // the worker is behind: it hears of it at the heartbeat
				}
			}
			if len(*resp.TaskIDs) > 0 || time.Since(sent) >= time.Second {
				backoff = time.Second
				continue
			}
		} else {
			b.w.log.Debug("waiting for cancels failed; trying again", "err", err, "in", backoff)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

type remoteTask struct {
	TaskID         int64           `json:"task_id"`
	Attempt        int             `json:"attempt"`
	LeaseToken     string          `json:"lease_token"`
	LeaseExpiresAt *time.Time      `json:"lease_expires_at"`
	Kind           string          `json:"kind"`
	Args           json.RawMessage `json:"args"`
	TimeoutSeconds *float64        `json:"timeout_seconds"`
	Queue          string          `json:"queue"`
	Priority       int             `json:"priority"`
	CreatedAt      time.Time       `json:"created_at"`
	MaxAttempts    int             `json:"max_attempts"`
	Executions     int             `json:"executions"`
	LeaseSeconds   float64         `json:"lease_seconds"`
	IdempotencyKey *string         `json:"idempotency_key"`
	Metadata       json.RawMessage `json:"metadata"`
	// Absent from an older server's tasks: then zero, nil, [] and nil.
	RunAt     time.Time             `json:"run_at"`
	StartedAt *time.Time            `json:"started_at"`
	Errors    []driver.AttemptError `json:"errors"`
	RetryOf   *int64                `json:"retry_of"`
}

func (t *remoteTask) job(owner string) *Job {
	j := &Job{
		ID: t.TaskID, Kind: t.Kind, Queue: t.Queue, Status: StatusRunning, Args: t.Args, Priority: t.Priority,
		Attempt: t.Attempt, Executions: t.Executions, MaxAttempts: t.MaxAttempts, Owner: owner,
		LeaseToken: t.LeaseToken, LeaseExpiresAt: t.LeaseExpiresAt, CreatedAt: t.CreatedAt,
		RunAt: t.RunAt, StartedAt: t.StartedAt, Errors: t.Errors, RetryOf: t.RetryOf,
	}
	if j.Errors == nil {
		j.Errors = []driver.AttemptError{} // as a job read from the database has it
	}
	if len(bytes.TrimSpace(j.Args)) == 0 || string(j.Args) == "null" {
		j.Args = json.RawMessage("{}")
	}
	if t.IdempotencyKey != nil {
		j.IdempotencyKey = *t.IdempotencyKey
	}
	if len(t.Metadata) > 0 && string(t.Metadata) != "null" { // null: none, as a local worker's job has it
		j.Metadata = t.Metadata
	}
	if t.TimeoutSeconds != nil && *t.TimeoutSeconds > 0 {
		// Whole milliseconds, as every timeout is (driver.Validate): seconds
		// times 1e9 fell a nanosecond short of 2,333 of the first 100,000.
		j.Timeout = time.Duration(math.Round(*t.TimeoutSeconds*1000)) * time.Millisecond
	}
	return j
}

// claimTries bounds how often a claim without a request_id (to an older
// server) is sent when no answer comes back.
const claimTries = 3

// claimBody is a task-claim request.
type claimBody struct {
	WorkerID    string   `json:"worker_id"`
	Queues      []string `json:"queues"`
	Limit       int      `json:"limit"`
	WaitSeconds float64  `json:"wait_seconds,omitempty"`
	RequestID   string   `json:"request_id,omitempty"`
	ReplayOnly  bool     `json:"replay_only,omitempty"`
}

// claimAnswer is task-claim's answer.
type claimAnswer struct {
	Tasks               []remoteTask `json:"tasks"`
	ClaimedAfterSeconds *float64     `json:"claimed_after_seconds"`
	Replayed            *bool        `json:"replayed"`
}

// UnmarshalJSON decodes a claim answer and refuses one with a task that
// carries no fence (a task_id or attempt below 1, an empty lease_token): no
// server answers such a task, so the answer is a proxy's stub or a broken
// server's. Run, its handler's every heartbeat and report was refused, and the
// task the server did claim sat leased to nobody until its lease ran out.
// Refused as undecodable, the claim is resent with its request_id, which the
// server answers with the tasks it claimed (the whole answer is refused: its
// other tasks are answered again too). So is an answer without tasks at all
// (no "tasks", or null; a server answers [] for none): a proxy's or a
// gateway's {} read as "nothing to do", and the worker idled without a word
// while the queue filled.
func (a *claimAnswer) UnmarshalJSON(b []byte) error {
	type plain claimAnswer // without this method
	if err := json.Unmarshal(b, (*plain)(a)); err != nil {
		return err
	}
	if a.Tasks == nil {
		return errors.New(`the answer has no "tasks" (a server answers [] for none): not a server's claim answer`)
	}
	for i, t := range a.Tasks {
		if t.TaskID < 1 || t.Attempt < 1 || t.LeaseToken == "" {
			return fmt.Errorf("task %d of %d carries no fence (task_id %d, attempt %d, lease_token %q): not a server's claim answer",
				i+1, len(a.Tasks), t.TaskID, t.Attempt, t.LeaseToken)
		}
	}
	return nil
}

// claimWithoutIDFor is how long claims go without a request_id after a server
// refused one as an unknown field (a variable for the tests).
var claimWithoutIDFor = time.Minute

func (b *httpBackend) claim(ctx context.Context, queue string, limit int) ([]*Job, claimLease, error) {
	req := claimBody{WorkerID: b.w.cfg.ID, Queues: []string{queue}, Limit: min(limit, maxRemoteClaim), WaitSeconds: b.wait.Seconds()}
	if time.Now().UnixNano() >= b.claimWithoutIDUntil.Load() {
		req.RequestID = newRequestID()
	}
	stopping := ctx // ended by Stop
	// The server answers within wait; the margin covers a slow claim, bounds
	// a connection that died silently, and ends the resends below. The lease
	// is the server's, once an answer has said it.
	lease := max(b.w.cfg.LeaseDuration, time.Duration(b.serverLease.Load()))
	ctx, cancel := context.WithTimeout(ctx, b.wait+lease)
	defer cancel()
	var resp claimAnswer
	// A claim whose answer did not arrive (the connection broke, perhaps after
	// the server claimed; the server restarting) is sent again with the same
	// request_id: the server answers the tasks the first one claimed, where a
	// new claim would leave them leased to nobody until their lease ran out,
	// an execution spent on each (a max_attempts 1 job failed unrun). It is
	// resent for as long as those tasks may still be held: ctx ends a long
	// poll and a lease after the first sending, the latest a claim of it can
	// have begun and ended. A server's refusal (4xx) is final.
	first := time.Now()
	sent := first // this sending's
	wait := 50 * time.Millisecond
	try := 1
	for ; ; try++ {
		if try > 1 {
			sent = time.Now()
		}
		err := b.post(ctx, "/internal/task-claim", req, &resp)
		if err == nil {
			break
		}
		var re *RemoteError
		if errors.As(err, &re) && re.Status == http.StatusBadRequest && req.RequestID != "" &&
			strings.Contains(re.Message, `unknown field "request_id"`) {
			// A server older than claims with a request_id: claim without one
			// for a while, then ask again.
			b.claimWithoutIDUntil.Store(time.Now().Add(claimWithoutIDFor).UnixNano())
			req.RequestID = ""
			continue
		}
		resend := retryable(err) && ctx.Err() == nil
		if req.RequestID == "" {
			resend = resend && !errors.As(err, &re) && try < claimTries
		}
		if !resend {
			return b.giveUp(req, first, stopping, err)
		}
		if try == 1 {
			// Said once: the resends may go on for a long poll and a lease,
			// and a worker pointed at a wrong or stopped server was silent
			// that long before its first "claim failed".
			b.w.log.Warn("claim got no answer from the server; resending it with the same request_id",
				"queue", queue, "err", err, "until", time.Until(first.Add(b.wait+lease)).Round(time.Second))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return b.giveUp(req, first, stopping, err)
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
	jobs := make([]*Job, len(resp.Tasks))
	for i := range resp.Tasks {
		jobs[i] = resp.Tasks[i].job(b.w.cfg.ID)
	}
	b.w.stats.Claimed.Add(int64(len(jobs)))
	// The lease began no earlier than the request was sent plus the time the
	// server says it held the request before claiming (a long poll's wait,
	// measured on the server's own clock, so no two clocks are compared).
	// Not when the answer arrived: an answer delayed on its way (a proxy, a
	// paused process) then looked like a fresh lease, and the job ran on
	// after another worker had claimed it. Answered to a resend, the first
	// sending may have claimed them: their lease may run from then. A server
	// that does not say (older than the field) gets the safe bound, the
	// sending.
	cl := claimLease{from: first}
	// Answered to a resend, the tasks are the first sending's only if the
	// server says they are a replay; a server that says they are not claimed
	// them for this sending.
	fresh := try == 1 || (resp.Replayed != nil && !*resp.Replayed)
	if fresh {
		cl.from = sent
	}
	if fresh && resp.ClaimedAfterSeconds != nil && *resp.ClaimedAfterSeconds > 0 {
		cl.from = sent.Add(time.Duration(*resp.ClaimedAfterSeconds * float64(time.Second)))
	}
	// The server sets the lease; the worker's own LeaseDuration is only a
	// default. Paced by a longer one, heartbeats came too late and the job ran
	// twice at once (a server at 3s, a worker at the default 30s).
	if len(resp.Tasks) > 0 && resp.Tasks[0].LeaseSeconds > 0 {
		cl.length = time.Duration(resp.Tasks[0].LeaseSeconds * float64(time.Second))
		b.serverLease.Store(int64(cl.length))
	}
	return jobs, cl, nil
}

// giveUp ends a claim that got no answer it could use (err). Stopping, it
// collects the claim (see collect). Not stopping, a claim whose last sending
// got no answer (err is retryable: the resends ran out of time) is collected
// too: a sending of it may still be on its way to the server (a proxy that
// queued it forwards it whether or not the worker is still there), and it
// claimed the next ready job for a worker that had moved on to another
// request_id, where it sat running under nobody until its lease expired and
// the reaper spent an execution on it (a max_attempts 1 job failed unrun).
// Collected, the request_id is closed, and what a sending of it took is
// answered; those tasks' leases are counted from the first sending, a long
// poll and a lease ago, so the worker gives them back unrun (runTask). The
// claim's error is still answered.
func (b *httpBackend) giveUp(req claimBody, first time.Time, stopping context.Context, err error) ([]*Job, claimLease, error) {
	switch {
	case req.RequestID == "":
		return nil, claimLease{}, err
	case stopping.Err() != nil:
		return b.collect(req, first, err)
	case retryable(err):
		jobs, cl, _ := b.collect(req, first, err)
		return jobs, cl, err
	}
	return nil, claimLease{}, err
}

// collect sends a claim that Stop cut short once more, only to collect
// (replay_only): the server may have committed it as the worker left, its
// answer lost. The server does not give back a claim that has a request_id
// (a resend may have been answered its tasks), so without this its jobs sat
// running under a stopped worker until their lease expired, and the reaper
// spent an execution on each (a max_attempts 1 job failed unrun). What it
// collects the worker gives back unrun (execute: draining). If no claim of
// it was made, the server closes the request_id: a sending of it still
// waiting there (behind a proxy that passes the disconnect on late) then
// claims nothing. It waits for an answer for up to a lease (the server's
// answer may wait for the claim's COMMIT: given up at 2 s, a committed job
// sat leased to the stopped worker, helper-50), and not past the hard stop;
// a server that cannot be reached at all is given up on after collectFor.
// On failure the claim's own error is answered.
func (b *httpBackend) collect(req claimBody, first time.Time, cause error) ([]*Job, claimLease, error) {
	req.ReplayOnly, req.WaitSeconds = true, 0
	lease := max(b.w.cfg.LeaseDuration, time.Duration(b.serverLease.Load()))
	ctx, cancel := context.WithTimeout(b.w.jobsCtx, lease)
	defer cancel()
	began := time.Now()
	var resp claimAnswer
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		err := b.post(ctx, "/internal/task-claim", req, &resp)
		if err == nil {
			break
		}
		var op *net.OpError
		unreachable := errors.As(err, &op) && op.Op == "dial" && time.Since(began) >= collectFor
		if !retryable(err) || ctx.Err() != nil || unreachable {
			// A server older than replay_only refuses it (400): its claim,
			// if committed, waits for its lease as before.
			b.w.log.Warn("could not collect the claim given up on; the tasks it may have taken wait for their lease",
				"request_id", req.RequestID, "err", err)
			return nil, claimLease{}, cause
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	jobs := make([]*Job, len(resp.Tasks))
	for i := range resp.Tasks {
		jobs[i] = resp.Tasks[i].job(b.w.cfg.ID)
	}
	b.w.stats.Claimed.Add(int64(len(jobs)))
	return jobs, claimLease{from: first}, nil
}

// collectFor bounds a stopping worker's collect of its claim under way when
// the server cannot be reached at all (a connection refused): it holds Stop
// no longer than this (its claim's tasks, if any, then wait for their lease,
// as they did before collects).
const collectFor = 2 * time.Second

// fenceBody is the fence every call about one task carries.
type fenceBody struct {
	TaskID     int64  `json:"task_id"`
	Attempt    int    `json:"attempt"`
	LeaseToken string `json:"lease_token"`
}

func fenceOf(f driver.FenceParams) fenceBody { return fenceBody{f.ID, f.Attempt, f.LeaseToken} }

// heartbeat renews the lease for the length the answering server sets, which
// its answer gives (lease_seconds): servers over one database may be set
// differently, and a worker paced by the claim's length let a shorter renewal
// expire between its heartbeats.
//
// A server's answer says what it did: the lease it renewed (lease_expires_at,
// which every server version sends) or that the job was canceled. An answer
// that says neither (200 {}: a proxy answering for a server it could not
// reach) renewed nothing and is a failed heartbeat, tried again until the
// give-up point: counted as a renewal, it let the lease expire under a
// handler that ran on, and the reaper gave the job to another worker.
func (b *httpBackend) heartbeat(ctx context.Context, f driver.FenceParams) (bool, time.Duration, error) {
	var resp struct {
		CancelRequested bool       `json:"cancel_requested"`
		LeaseExpiresAt  *time.Time `json:"lease_expires_at"`
		LeaseSeconds    *float64   `json:"lease_seconds"`
	}
	const path = "/internal/heartbeat"
	err := b.post(ctx, path, fenceOf(f), &resp)
	if err == nil && !resp.CancelRequested && resp.LeaseExpiresAt == nil {
		return false, 0, fmt.Errorf("POST %s: the 200 answer renews no lease (no lease_expires_at) and requests no cancel: not a server's answer", path)
	}
	var lease time.Duration
	if err == nil && resp.LeaseSeconds != nil && *resp.LeaseSeconds > 0 {
		lease = time.Duration(*resp.LeaseSeconds * float64(time.Second))
	}
	return resp.CancelRequested, lease, err
}

type completeBody struct {
	fenceBody
	Status        string          `json:"status"`
	Output        json.RawMessage `json:"output,omitempty"`
	Error         string          `json:"error,omitempty"`
	Stack         string          `json:"stack,omitempty"`
	SnoozeSeconds *float64        `json:"snooze_seconds,omitempty"` // a pointer: 0 is a snooze too
	// RetryAfterSeconds is the least delay before a retry (an abandoned
	// handler's: its lease), whatever the server's backoff says.
	RetryAfterSeconds float64 `json:"retry_after_seconds,omitempty"`
	RequestID         string  `json:"request_id,omitempty"`
}

// report sends a task-complete, giving up at deadline, and returns the job's
// status and attempt afterwards. One sending waits for its answer at most half the time
// left (and at least a heartbeat interval of the lease), counted from when its
// request was written: the worker's report loop then sends it again (with its
// request_id, so it is applied once). A sending swallowed on its way (a proxy
// that never answers, a pooled connection to a server that went away) held the
// report until its deadline, a lease: the outcome was never recorded, and the
// reaper ran the job again. The count starts once the request is written, so a
// large result on a slow link, or a server slow to take it, is not cut short.
// It stops at a success's status (the report was applied; its body, the job
// with its result, may be large too), and runs on through any other answer's
// body: a proxy's error page that trickled in held the report until its
// deadline as a swallowed request did.
func (b *httpBackend) report(deadline time.Time, body completeBody) (JobStatus, int, error) {
	var out struct {
		ID      int64     `json:"id"`
		Status  JobStatus `json:"status"`
		Attempt int       `json:"attempt"`
	}
	lease := time.Duration(b.serverLease.Load()) // the server's, which the job's claim said
	if lease == 0 {
		lease = b.w.cfg.LeaseDuration
	}
	interval, _ := b.w.heartbeatTiming(lease)
	wait := max(interval, time.Until(deadline)/2)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	ctx, applied, cut := answerWithin(ctx, wait)
	const path = "/internal/task-complete"
	resp, err := b.send(ctx, path, body)
	if err == nil {
		if resp.StatusCode/100 == 2 {
			applied()
		}
		err = read(path, resp, &out)
		if err == nil && (out.ID != body.TaskID || out.Status == "") {
			// A server answers the job it recorded the report on. A proxy's
			// stub (200 {}) was taken for a recorded result: the worker told
			// "succeeded", sent it no more, and the job ran again after its
			// lease, failed on a last attempt (helper-88). As no answer, the
			// report is sent again, with its request_id.
			err = fmt.Errorf("POST %s: the %d answer is not job %d (id %d, status %q): not a server's answer",
				path, resp.StatusCode, body.TaskID, out.ID, out.Status)
		}
	}
	if cut() && err != nil {
		err = fmt.Errorf("POST %s: no whole answer within %s of sending it: %w", path, wait, err)
	}
	return out.Status, out.Attempt, err
}

// answerWithin returns ctx, canceled if the answer to the request made with it
// has not come within d of the request's being written, its body included
// until stop is called. cut stops the count too, and reports whether ctx was
// canceled by it.
func answerWithin(ctx context.Context, d time.Duration) (_ context.Context, stop func(), cut func() bool) {
	ctx, cancel := context.WithCancel(ctx)
	var (
		mu      sync.Mutex
		timer   *time.Timer
		stopped bool
		fired   atomic.Bool
	)
	stop = func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		if timer != nil {
			timer.Stop()
		}
	}
	trace := &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) {
			mu.Lock()
			defer mu.Unlock()
			if timer == nil && !stopped {
				timer = time.AfterFunc(d, func() { fired.Store(true); cancel() })
			}
		},
	}
	return httptrace.WithClientTrace(ctx, trace), stop, func() bool {
		stop()
		cancel()
		return fired.Load()
	}
}

func (b *httpBackend) complete(deadline time.Time, f driver.FenceParams, result json.RawMessage, _ bool) error {
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	_, _, err := b.report(deadline, completeBody{fenceBody: fenceOf(f), Status: "succeeded", Output: result, RequestID: f.RequestID})
	return err
}

// fail sends "failed" for a permanent error, else "retry": the server picks the
// backoff and whether attempts remain, so fl.retryDelay is not sent.
func (b *httpBackend) fail(deadline time.Time, f driver.FenceParams, fl failure) (bool, error) {
	body := completeBody{fenceBody: fenceOf(f), Status: "retry", Error: fl.err, Stack: fl.stack, RequestID: f.RequestID,
		RetryAfterSeconds: fl.minDelay.Seconds()}
	if fl.permanent {
		body.Status, body.RetryAfterSeconds = "failed", 0
	}
	status, attempt, err := b.report(deadline, body)
	var re *RemoteError
	if body.RetryAfterSeconds > 0 && errors.As(err, &re) && re.Status == http.StatusBadRequest &&
		strings.Contains(re.Message, `unknown field "retry_after_seconds"`) {
		// A server older than the field: report the failure without it (its
		// backoff then decides the delay) rather than not at all, which left
		// the job to the reaper without its error.
		body.RetryAfterSeconds = 0
		status, attempt, err = b.report(deadline, body)
	}
	return failedBy(status, attempt, f), err
}

func (b *httpBackend) snooze(deadline time.Time, f driver.FenceParams, d time.Duration) error {
	secs := d.Seconds()
	_, _, err := b.report(deadline, completeBody{
		fenceBody: fenceOf(f), Status: "retry", Error: fmt.Sprintf("snoozed for %s", d),
		SnoozeSeconds: &secs, RequestID: f.RequestID,
	})
	return err
}

// post sends one JSON request and decodes a 2xx answer into out; any other
// answer becomes a *RemoteError.
func (b *httpBackend) post(ctx context.Context, path string, in, out any) error {
	resp, err := b.send(ctx, path, in)
	if err != nil {
		return err
	}
	return read(path, resp, out)
}

// send sends one JSON request and returns its answer, whose body read must
// read and close.
func (b *httpBackend) send(ctx context.Context, path string, in any) (*http.Response, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("POST %s: encode request: %w", path, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", path, err)
	}
	return resp, nil
}

// read decodes a 2xx answer into out, or turns any other into a
// *RemoteError, and closes its body.
func read(path string, resp *http.Response, out any) error {
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return remoteError(path, resp)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("POST %s: decode the %d answer: %w", path, resp.StatusCode, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) // lets the connection be reused
	return nil
}

// remoteError reads an error answer: {"error": {"code", "message"}}, or
// whatever a proxy in between sent instead.
func remoteError(path string, resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &RemoteError{Method: http.MethodPost, Path: path, Status: resp.StatusCode}
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if resp.StatusCode/100 == 3 {
		e.Code = strings.ToLower(strings.ReplaceAll(http.StatusText(resp.StatusCode), " ", "_"))
		e.Message = fmt.Sprintf("%s, a redirect to %q, which the worker does not follow: give the server's own URL", resp.Status, resp.Header.Get("Location"))
		return e
	}
	if json.Unmarshal(raw, &body) == nil && (body.Error.Code != "" || body.Error.Message != "") {
		e.Code, e.Message = body.Error.Code, body.Error.Message
		// A server says the job's state when it refused the call
		// (server.JobStatusHeader; the server imports this package).
		status := JobStatus(resp.Header.Get("Drover-Job-Status"))
		if attempt, err := strconv.Atoi(resp.Header.Get("Drover-Job-Attempt")); err == nil && status.Valid() {
			e.JobStatus, e.Attempt = status, attempt
		}
	} else {
		e.Code = strings.ToLower(strings.ReplaceAll(http.StatusText(resp.StatusCode), " ", "_"))
		e.Message = strings.TrimSpace(string(raw))
		if len(e.Message) > 200 {
			e.Message = e.Message[:200] + "…"
		}
		if e.Message == "" {
			e.Message = resp.Status
		}
	}
	return e
}
