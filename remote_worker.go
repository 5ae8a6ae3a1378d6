package drover

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/deflog"
)

// RemoteConfig says how a remote worker reaches a Drover server.
type RemoteConfig struct {
	// URL is the server's base URL, e.g. http://127.0.0.1:7420 (required).
	URL string
	// Token, when set, is sent as "Authorization: Bearer <Token>" (a worker or admin token).
	Token string
	// HTTPClient makes the requests [a client without an overall timeout: every
	// call bounds its own time, and that follows no redirect: a 3xx answer is
	// an error naming where it pointed]. Its Timeout, if set, must exceed
	// WaitSeconds.
	HTTPClient *http.Client
	// WaitSeconds is how long a claim may wait on the server when nothing is
	// ready (long-poll); Stop ends a waiting claim at once. Negative: no
	// long-poll, claim every PollInterval instead. A server waits at most its
	// own longest long-poll (server.Config.MaxWait, 60 s for drover server);
	// more than MaxWaitSeconds is refused. [20]
	WaitSeconds int
}

// MaxWaitSeconds bounds RemoteConfig.WaitSeconds: an hour, far above any
// server's long-poll. A larger one wrapped into a negative wait past ~9.2e9.
const MaxWaitSeconds = 3600

// DefaultWaitSeconds is the long-poll of a remote worker's claims.
const DefaultWaitSeconds = 20

// ErrUnauthorized is matched (errors.Is) by a server's 401 or 403 answer: the
// token is missing, wrong, or not allowed on that endpoint.
var ErrUnauthorized = errors.New("not authorized by the server; check the token")

// RemoteError is a non-2xx answer of a Drover server, with the server's code and
// message. errors.Is matches ErrLeaseLost for 409, ErrNotFound for 404,
// ErrUnauthorized for 401 and 403, and ErrInvalidArgument for 400; a 409 with
// code "conflict" (a request_id another call used) matches ErrRequestReused
// and ErrInvalidArgument, not ErrLeaseLost: the lease may well hold.
type RemoteError struct {
	Method, Path string
	Status       int    // HTTP status
	Code         string // the server's error code, e.g. "lease_lost"
	Message      string
	// JobStatus and Attempt are the job's when the server refused the call
	// (lease_lost, invalid_transition), from a server that says them (its
	// headers Drover-Job-Status and Drover-Job-Attempt); then
	// errors.As finds a *driver.RefusedError too, and driver.CanceledDuring
	// tells a cancel during the caller's attempt from a lost lease.
	JobStatus JobStatus
	Attempt   int
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("%s %s: server answered %d %s: %s", e.Method, e.Path, e.Status, e.Code, e.Message)
}

func (e *RemoteError) Unwrap() []error {
	switch e.Status {
	case http.StatusConflict:
		if e.Code == codeConflict {
			return []error{ErrInvalidArgument, ErrRequestReused}
		}
		if e.JobStatus != "" {
			return []error{&driver.RefusedError{Op: e.Path, Now: e.JobStatus, Attempt: e.Attempt, Err: ErrLeaseLost}}
		}
		return []error{ErrLeaseLost}
	case http.StatusNotFound:
		return []error{ErrNotFound}
	case http.StatusUnauthorized, http.StatusForbidden:
		return []error{ErrUnauthorized}
	case http.StatusBadRequest:
		return []error{ErrInvalidArgument}
	}
	return nil
}

// codeConflict is the server's code of a 409 for a request_id another call
// used (server.CodeConflict; the server imports this package).
const codeConflict = "conflict"

// NewRemoteWorker returns a Worker that needs no database: it claims, heartbeats
// and reports through a Drover server's worker protocol (/internal/task-claim,
// /internal/heartbeat, /internal/task-complete). Handlers, Permanent, Snooze,
// panics, timeouts, operator cancels and Stop behave as with NewWorker, except:
//   - the server decides retries and their backoff: WorkerConfig.Backoff and
//     WithBackoff are not used;
//   - the server sets the lease: the worker paces heartbeats and report retries
//     by the lease_seconds of its claims' answers, and gives up on a handler
//     at most half that lease after its context ended; WorkerConfig's
//     LeaseDuration only bounds how long a lost claim is resent;
//   - a handler abandoned after TimeoutGrace is reported with a least retry
//     delay of the lease (retry_after_seconds), which the server's backoff
//     cannot shorten: its job runs again no sooner than a crashed worker's;
//   - the *Job a handler gets holds what a task carries: its id, kind, queue,
//     args, idempotency key, metadata, priority, attempt, executions,
//     max_attempts, timeout, created_at, run_at, started_at, earlier
//     attempts' errors, retry_of and lease, not its workflow fields (nor,
//     from a server older than this release, run_at, started_at, errors
//     and retry_of).
//
// As with NewWorker, a job whose claim is answered while the worker stops is
// given back unrun, and a claim under way when Stop is called is canceled:
// the server rolls it back if it had not committed.
func NewRemoteWorker(cfg RemoteConfig, wcfg *WorkerConfig) (*Worker, error) {
	if wcfg == nil || wcfg.Workers == nil {
		return nil, errors.New("drover: NewRemoteWorker needs a config with Workers")
	}
	base, err := serverURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	if err := driver.CheckToken("token", cfg.Token); err != nil {
		return nil, err
	}
	if cfg.WaitSeconds > MaxWaitSeconds {
		return nil, driver.Invalid("wait_seconds", "%d, at most %d (a server waits at most its own MaxWait, 60 s for drover server)", cfg.WaitSeconds, MaxWaitSeconds)
	}
	wait := time.Duration(cfg.WaitSeconds) * time.Second
	if cfg.WaitSeconds == 0 {
		wait = DefaultWaitSeconds * time.Second
	}
	wait = max(wait, 0)
	hc := cfg.HTTPClient
	if hc == nil {
		// A redirect is answered, not followed: Go follows a 301, 302 or 303
		// with a GET, which the server refused 405 without saying why, and a
		// 307 or 308 sent the worker's token and reports to another host.
		hc = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if hc.Timeout > 0 && hc.Timeout <= wait {
		return nil, driver.Invalid("http_client", "timeout %s must be longer than the claim long-poll (%s); raise it or lower WaitSeconds", hc.Timeout, wait)
	}
	w, err := newWorker(wcfg, deflog.New())
	if err != nil {
		return nil, err
	}
	if w.cfg.ClaimBatch > maxRemoteClaim {
		w.cfg.ClaimBatch = maxRemoteClaim
	}
	w.be = &httpBackend{base: base, token: cfg.Token, hc: hc, wait: wait, w: w}
	return w, nil
}

// serverURL checks the server's base URL and returns it without a trailing slash.
func serverURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", driver.Invalid("server", "URL is empty; give the Drover server's URL, e.g. http://127.0.0.1:7420")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		// Not the URL itself: what is before an '@' may be a password.
		shown := raw
		if at := strings.LastIndex(raw, "@"); at >= 0 {
			shown = "…" + raw[at:]
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL it quotes
		}
		return "", driver.Invalid("server", "URL %q does not parse: %v", shown, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", driver.Invalid("server", "URL %q: scheme must be http or https", raw)
	case u.Host == "":
		return "", driver.Invalid("server", "URL %q has no host", raw)
	case u.RawQuery != "" || u.Fragment != "":
		return "", driver.Invalid("server", "URL %q: give the base URL, without a query or fragment", raw)
	case u.User != nil:
		// All of the user info is hidden: a user alone is a token to some
		// servers, and url.Redacted keeps it.
		shown := *u
		shown.User = url.User("xxxxx")
		return "", driver.Invalid("server", "URL %q: pass credentials as a token, not in the URL", shown.String())
	}
	return strings.TrimRight(u.String(), "/"), nil
}
