package drover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-dev/drover/driver"
)

// localBackend runs a Worker straight on the database. A claim claims and starts
// in one statement (ClaimParams.Start); successful completions are batched into
// JobCompleteManyErrs transactions; retry and snooze delays are added to the
// database clock.
type localBackend struct {
	drv driver.Driver
	w   *Worker // for its config, log and stats

	// Successes waiting for the completer, in the order they came. Handing
	// one over never waits: the jobs a worker holds are bounded already
	// (produce's pending), and a goroutine blocked on a full channel here
	// was a goroutine held per job again (see runners).
	mu      sync.Mutex
	waiting []completion
	closed  bool
	// The completer's pace, for completionWait, which the claim loops read
	// without the lock: successes handed over and not yet answered, how long
	// the last write took a completion, and the write under way (when it
	// began, UnixNano, zero if none; how many it carries).
	unwritten, perCompletion atomic.Int64
	writeBegan, writeSize    atomic.Int64
	wake                     chan struct{} // a success is waiting, or closed is set
	completerWG              sync.WaitGroup
}

// completion is one success for the completer to write: the caller waits on
// reply, or, handed over by completeAsync, x is told.
type completion struct {
	p     driver.CompleteParams
	reply chan error
	x     *execution
}

func newLocalBackend(drv driver.Driver, w *Worker) *localBackend {
	return &localBackend{drv: drv, w: w}
}

func (b *localBackend) start() {
	b.wake = make(chan struct{}, 1)
	b.completerWG.Add(1)
	go b.completer()
}

func (b *localBackend) stop() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.signal()
	b.completerWG.Wait()
}

func (b *localBackend) check(context.Context) error { return nil }

func (b *localBackend) longPoll() bool { return false }

// completionWait is how long the successes not yet written take to write at
// the pace of the last write, or of the write under way once it has taken
// longer: a database that stalls slows the pace from the moment it stalls.
func (b *localBackend) completionWait() time.Duration {
	n := b.unwritten.Load()
	if n <= 0 {
		return 0
	}
	per := time.Duration(b.perCompletion.Load())
	if per == 0 && n >= int64(b.w.cfg.CompletionBatch) {
		// No write has finished yet: the pace is unknown, and more than a
		// batch waits for it. The claims of a worker's first moments, before
		// its first write came back, went on to its bound on held jobs.
		return maxTimer
	}
	if began, size := b.writeBegan.Load(), b.writeSize.Load(); began != 0 && size > 0 {
		per = max(per, time.Since(time.Unix(0, began))/time.Duration(size))
	}
	return time.Duration(n) * per
}

func (b *localBackend) wakeups(ctx context.Context) (<-chan string, error) {
	return b.drv.WakeupSubscribe(ctx)
}

// claim claims and starts in one statement: a local worker runs what it claims at
// once, so it never holds a claimed-but-not-started job (nothing to give back on
// shutdown) and each job costs one row version fewer.
func (b *localBackend) claim(_ context.Context, queue string, limit int) ([]*Job, claimLease, error) {
	// A graceful Stop does not cancel a claim under way: one canceled between
	// its commit and its answer would leave its jobs running, never run, until
	// their lease expired and the reaper counted the execution. It waits for it
	// instead (one statement), up to a lease; only the hard stop, when Stop's
	// own deadline passes, cancels it. So that the hard stop cannot land in
	// that window either, the claim asks Abandoned before it commits (the hard
	// stop rolls it back), and a commit under way is not canceled (PostgreSQL's
	// claim then runs in a transaction of its own): what committed is answered,
	// and execute gives it back.
	ctx, cancel := context.WithTimeout(b.w.jobsCtx, b.w.cfg.LeaseDuration)
	defer cancel()
	jobs, err := b.drv.JobClaim(ctx, driver.ClaimParams{
		Queues: []string{queue}, Limit: limit, Owner: b.w.cfg.ID, LeaseDuration: b.w.cfg.LeaseDuration, Start: true,
		Abandoned: func() bool { return b.w.jobsCtx.Err() != nil },
	})
	b.w.stats.Claimed.Add(int64(len(jobs)))
	return jobs, claimLease{}, err
}

func (b *localBackend) heartbeat(ctx context.Context, f driver.FenceParams) (bool, time.Duration, error) {
	f.LeaseDuration = b.w.cfg.LeaseDuration
	res, err := b.drv.JobHeartbeat(ctx, driver.HeartbeatParams{FenceParams: f})
	return res.CancelRequested, 0, err
}

// complete stores a successful result through the batching completer, which
// bounds each batch's write itself.
//
// It sends no request_id: a request_id in the completion's event is an entry
// in the events' request index for every job, and the fence already tells a
// repeat apart. A job that is succeeded at this fence's attempt was completed
// by this report: only the holder of that attempt's lease token can complete it
// (a claim is the only way to a token, and every claim takes a new attempt),
// and a worker reports each job once. So when a retry, sent after a call that
// failed without an answer, finds the lease lost, the job is read: succeeded at
// our attempt means the earlier call was applied.
func (b *localBackend) complete(deadline time.Time, f driver.FenceParams, result json.RawMessage, retry bool) error {
	f.RequestID = ""
	reply := replyChans.Get().(chan error)
	b.hand(completion{p: driver.CompleteParams{FenceParams: f, Result: result}, reply: reply})
	err := <-reply
	replyChans.Put(reply) // empty again, and the completer answers each once
	if retry && errors.Is(err, driver.ErrLeaseLost) {
		return b.completedEarlier(deadline, f, err)
	}
	return err
}

// completeAsync hands x's success to the completer, which calls x.completed
// with its answer once the batch is written. It sends no request_id, for the
// reason complete gives.
func (b *localBackend) completeAsync(x *execution) {
	f := x.fence
	f.RequestID = ""
	b.hand(completion{p: driver.CompleteParams{FenceParams: f, Result: x.result}, x: x})
}

// completedEarlier answers a retried completion that found the lease lost: nil
// if the job is succeeded at f's attempt (the earlier call was applied), lost
// if it is not. A failed read answers a retryable error, so the report tries
// again: a read that could not tell must not end in a lost lease. The read is
// bounded by the report's deadline, not by the worker's jobs context: a result
// that arrives after a hard stop is kept, and so is this answer.
func (b *localBackend) completedEarlier(deadline time.Time, f driver.FenceParams, lost error) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	j, err := b.drv.JobGet(ctx, f.ID)
	switch {
	case errors.Is(err, driver.ErrNotFound):
		return lost
	case err != nil:
		return fmt.Errorf("%w (and reading the job to tell whether an earlier try was applied failed: %v)", errRetryCheck, err)
	case j.Status == StatusSucceeded && j.Attempt == f.Attempt:
		return nil
	}
	return lost
}

// errRetryCheck: a retried completion found the lease lost and the read that
// would tell whether its earlier try was applied failed; the report retries.
var errRetryCheck = errors.New("completion retry could not be checked")

// replyChans recycles the channels completions are answered on: one per job
// was one of a busy worker's larger sources of garbage.
var replyChans = sync.Pool{New: func() any { return make(chan error, 1) }}

func (b *localBackend) fail(deadline time.Time, f driver.FenceParams, fl failure) (bool, error) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	j, err := b.drv.JobFail(ctx, driver.FailParams{
		FenceParams: f, Error: fl.err, Stack: fl.stack, Permanent: fl.permanent, RetryDelay: max(fl.retryDelay, fl.minDelay),
	})
	if err != nil {
		return false, err
	}
	return failedBy(j.Status, j.Attempt, f), nil
}

func (b *localBackend) snooze(deadline time.Time, f driver.FenceParams, d time.Duration) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	_, err := b.drv.JobSnooze(ctx, driver.SnoozeParams{FenceParams: f, Delay: d})
	return err
}

// hand gives c to the completer.
func (b *localBackend) hand(c completion) {
	b.mu.Lock()
	b.waiting = append(b.waiting, c)
	first := len(b.waiting) == 1
	b.unwritten.Add(1)
	b.mu.Unlock()
	if first {
		b.signal()
	}
}

func (b *localBackend) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// completer writes completions in batches of up to CompletionBatch: whatever is
// waiting when a batch starts goes into it, so batching adds no delay when the
// worker is idle. It ends once stop was called and nothing waits.
func (b *localBackend) completer() {
	defer b.completerWG.Done()
	var taken []completion
	for {
		b.mu.Lock()
		for len(b.waiting) == 0 && !b.closed {
			b.mu.Unlock()
			<-b.wake
			b.mu.Lock()
		}
		// Swapped, not copied: new successes go to the emptied slice while
		// these are written.
		taken, b.waiting = b.waiting, taken[:0]
		b.mu.Unlock()
		if len(taken) == 0 {
			return // closed, and nothing waits
		}
		for i := 0; i < len(taken); i += b.w.cfg.CompletionBatch {
			b.write(taken[i:min(len(taken), i+b.w.cfg.CompletionBatch)])
		}
		clear(taken)
		taken = taken[:0]
	}
}

// write writes one batch in a transaction and answers each completion.
func (b *localBackend) write(batch []completion) {
	params := make([]driver.CompleteParams, len(batch))
	for i, c := range batch {
		params[i] = c.p
	}
	began := time.Now()
	b.writeSize.Store(int64(len(batch)))
	b.writeBegan.Store(began.UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	errs := b.drv.JobCompleteManyErrs(ctx, params)
	cancel()
	// Before the answers, which free room to claim: a claim loop held back
	// by the wait (see produce) looks again then.
	b.perCompletion.Store(max(1, int64(time.Since(began))/int64(len(batch)))) // 0: none measured yet
	b.writeBegan.Store(0)
	b.unwritten.Add(-int64(len(batch)))
	for i, c := range batch {
		if c.x != nil {
			c.x.completed(errs[i])
		} else {
			c.reply <- errs[i]
		}
	}
}
