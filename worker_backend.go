package drover

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/drover-dev/drover/driver"
)

// backend is where a Worker's jobs live: the database itself (localBackend) or a
// Drover server over HTTP (httpBackend). Everything else — slots per queue,
// timeouts, panics, heartbeats, cancellation, retrying a report with the same
// request_id, graceful shutdown — is the Worker's and the same for both.
//
// Every call that touches a job carries its fence (id, attempt, lease_token); a
// stale fence gives an error matching ErrLeaseLost (or ErrNotFound) and changes
// nothing.
type backend interface {
	// start and stop bracket the worker's life; stop runs after the last report.
	start()
	stop()
	// check, before start, refuses a worker that cannot work at all (a remote
	// worker whose token the server refuses); a failure to check is no refusal.
	check(ctx context.Context) error
	// claim returns up to limit jobs of queue, already running under a lease held
	// by this worker. A long-polling backend may hold the call until work is ready
	// or ctx ends, and must then say when the lease may have begun.
	claim(ctx context.Context, queue string, limit int) (jobs []*Job, lease claimLease, err error)
	// heartbeat extends the lease and reports whether an operator canceled the
	// job, and for how long the lease was renewed when the answer says (a
	// server's; zero: for the claim's length).
	heartbeat(ctx context.Context, f driver.FenceParams) (cancelRequested bool, renewedFor time.Duration, err error)
	// complete stores a successful result. Like fail and snooze, it gives up by
	// deadline; a backend that bounds its writes itself may ignore it, so a
	// report does not pay for a context and a timer per job it does not use.
	// retry is set when an earlier call for this report failed, so it may have
	// been applied without its answer arriving.
	complete(deadline time.Time, f driver.FenceParams, result json.RawMessage, retry bool) error
	// fail reports a failed execution; dead is true when the job went to the DLQ.
	fail(deadline time.Time, f driver.FenceParams, fl failure) (dead bool, err error)
	// snooze puts the job back to run after d without using an attempt.
	snooze(deadline time.Time, f driver.FenceParams, d time.Duration) error
	// wakeups delivers names of queues that may have work ("" for all) until ctx
	// ends; a nil channel means there are none and the worker relies on claim.
	wakeups(ctx context.Context) (<-chan string, error)
	// longPoll reports whether claim itself waits for work, so an empty claim
	// can be followed by the next one without a poll tick.
	longPoll() bool
	// completionWait is how long a success handed over now would wait for
	// its write, as far as the backend can tell: behind a library worker's
	// batching completer, the successes not yet written at the pace of its
	// writes; zero for a backend that writes each as it comes.
	completionWait() time.Duration
}

// claimLease is what a backend knows of the lease its claim took.
type claimLease struct {
	// from is the earliest the lease may have begun; zero: when the claim was
	// sent (see produce).
	from time.Time
	// length is how long the lease lasts from then, and what each heartbeat
	// renews it for; zero: WorkerConfig.LeaseDuration.
	length time.Duration
}

// failure is a failed execution as reported to a backend.
type failure struct {
	err        string
	stack      string        // of a panic
	permanent  bool          // straight to the DLQ
	retryDelay time.Duration // from the worker's backoff; a server computes its own
	minDelay   time.Duration // the least retry delay, whoever computes it (an abandoned handler's: its lease)
}

// failedBy reports whether a failure report of fence f's attempt failed the
// job, from the job its answer holds (status, attempt). The answer to a
// resend that repeats an applied report (its first answer lost) is the job
// as it is now: a later attempt may have claimed the retry since and failed
// it, which is no outcome of this report. A job is claimed again only from
// queued, so one failed at f's attempt was failed by this report.
func failedBy(status JobStatus, attempt int, f driver.FenceParams) bool {
	return status == StatusFailed && attempt == f.Attempt
}

// retryable reports whether repeating a report (with the same request_id) may
// succeed: not when the lease is lost, or a server or the driver refused the
// request itself (a result the database cannot store was retried for a whole
// lease, and the job then ran again).
func retryable(err error) bool {
	if errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalidArgument) {
		return false
	}
	if untrustedServer(err) {
		return false // the same certificate is refused again: sending again changes nothing
	}
	var re *RemoteError
	if errors.As(err, &re) {
		return re.Status >= 500 || re.Status == http.StatusRequestTimeout || re.Status == http.StatusTooManyRequests
	}
	return true
}

// retryableReport reports whether a report (or a give-back) may be sent again
// with its request_id: as retryable, and also when the server refused the
// worker's token (401, 403). That refusal is not of what the report says, so
// it is never replaced by a failure, and the same report may yet be taken
// before its deadline: by another server behind a load balancer during a
// token rotation (a success answered 401 by the server still on the old token
// was reported as a failure instead, which the other one took: the job went
// to the DLQ though its handler had run), or once the token is set right.
func retryableReport(err error) bool {
	return retryable(err) || errors.Is(err, ErrUnauthorized)
}

// untrustedServer reports an https server whose certificate the worker's
// client does not trust (an unknown authority, another host's name, an
// expired one): a refusal of the server, which no resending changes. A worker
// taking it for a server that did not answer resent its claims for ever, and a
// Stop then waited for its collect until the shutdown timeout.
func untrustedServer(err error) bool {
	var (
		cv *tls.CertificateVerificationError
		ua x509.UnknownAuthorityError
		hn x509.HostnameError
		ci x509.CertificateInvalidError
	)
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci)
}
