package drover

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/pgdriver"
	"github.com/drover-dev/drover/driver/sqlitedriver"
	"github.com/drover-dev/drover/internal/deflog"
	"github.com/drover-dev/drover/lifecycle"
	"github.com/drover-dev/drover/wakeup"
)

// Config configures a Client.
type Config struct {
	// Logger gets the client's logs, and those of its workers and engines
	// that have no Logger of their own. nil: warnings and errors go through
	// slog.Default() (stderr, unless the program set another default).
	Logger             *slog.Logger
	DefaultMaxAttempts int // 0: DefaultMaxAttempts
	MaxPayloadBytes    int // args + metadata; 0: 1 MiB; negative is refused
	// Wakeups, when set, gets a pointer for every job enqueued ready to run, so
	// workers subscribed to the transport claim it at once. Losing a pointer loses
	// no job: workers poll and the engine's reconciler republishes.
	Wakeups wakeup.Transport
}

// Client enqueues and inspects jobs. It is safe for concurrent use.
type Client struct {
	drv driver.Driver
	cfg Config
	log *slog.Logger
}

// NewClient returns a Client over drv. cfg may be nil.
func NewClient(drv driver.Driver, cfg *Config) (*Client, error) {
	if drv == nil {
		return nil, errors.New("drover: NewClient needs a driver")
	}
	c := &Client{drv: drv}
	if cfg != nil {
		c.cfg = *cfg
	}
	if c.cfg.DefaultMaxAttempts == 0 {
		c.cfg.DefaultMaxAttempts = DefaultMaxAttempts
	}
	if c.cfg.DefaultMaxAttempts < 0 || c.cfg.DefaultMaxAttempts > driver.MaxInt32 {
		return nil, driver.Invalid("default_max_attempts", "%d, must be 0 (the default) to %d", c.cfg.DefaultMaxAttempts, driver.MaxInt32)
	}
	if c.cfg.MaxPayloadBytes < 0 {
		return nil, driver.Invalid("max_payload_bytes", "%d is negative", c.cfg.MaxPayloadBytes)
	}
	c.log = c.cfg.Logger
	if c.log == nil {
		c.log = deflog.New()
	}
	return c, nil
}

// Open connects to a database by URL: a postgres:// (or postgresql://) URL selects
// PostgreSQL, anything else is a SQLite file path (sqlite:// and file: prefixes
// allowed). It does not migrate; call MigrateUp on the result.
func Open(ctx context.Context, url string, logger *slog.Logger) (driver.Driver, error) {
	url = strings.TrimSpace(url)
	switch {
	case url == "":
		return nil, driver.Invalid("database_url", "is empty; use a postgres:// URL or a SQLite file path")
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return pgdriver.New(ctx, url, pgdriver.Options{Logger: logger})
	case strings.Contains(url, "://") && !strings.HasPrefix(url, "sqlite://"):
		scheme, _, _ := strings.Cut(url, "://")
		return nil, driver.Invalid("database_url", "unsupported scheme %q; use postgres:// or a SQLite file path", scheme)
	case driver.IsKeywordConnString(url):
		// Not echoed: it may hold a password.
		return nil, driver.Invalid("database_url", "is a PostgreSQL keyword/value string (host=… dbname=…), not a SQLite file path; give PostgreSQL as a URL: postgres://user:password@host:5432/dbname")
	}
	path := strings.TrimPrefix(url, "sqlite://")
	drv, err := sqlitedriver.Open(path, sqlitedriver.Options{Logger: logger})
	if err != nil {
		// SQLite says only "unable to open database file" of a missing directory.
		file, _, _ := strings.Cut(strings.TrimPrefix(path, "file:"), "?")
		if dir := filepath.Dir(file); file != "" {
			if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
				return nil, driver.Invalid("database_url", "%q: the directory %q does not exist", path, dir)
			}
		}
	}
	return drv, err
}

// Driver returns the client's driver.
func (c *Client) Driver() driver.Driver { return c.drv }

// MaxPayloadBytes is the client's bound on a job's args + metadata
// (Config.MaxPayloadBytes, or its default).
func (c *Client) MaxPayloadBytes() int {
	if c.cfg.MaxPayloadBytes > 0 {
		return c.cfg.MaxPayloadBytes
	}
	return driver.DefaultMaxPayloadBytes
}

// Enqueue adds one job of kind with args (a JSON object: a struct or a map, or
// JSON text as json.RawMessage, []byte or string). With an idempotency key seen
// before, it returns the earlier job and Existing = true instead of adding one.
func (c *Client) Enqueue(ctx context.Context, kind string, args any, opts *EnqueueOpts) (*EnqueueResult, error) {
	res, err := c.EnqueueMany(ctx, []EnqueueParams{{Kind: kind, Args: args, Opts: opts}})
	if err != nil {
		return nil, err
	}
	return &res[0], nil
}

// EnqueueMany adds jobs in one transaction and one statement. Nothing is added if
// any job is invalid.
//
// On SQLite the transaction holds the file's one writer for the whole batch
// (~14 µs a job): other processes' writes wait for it, and fail after their
// busy timeout of 10 s (a million jobs took 14 s). Keep batches to tens of
// thousands there, or enqueue a larger set in several calls.
func (c *Client) EnqueueMany(ctx context.Context, params []EnqueueParams) ([]EnqueueResult, error) {
	ips, err := c.prepare(params)
	if err != nil {
		return nil, err
	}
	res, err := c.drv.JobInsertMany(ctx, ips)
	if err != nil {
		return nil, err
	}
	c.publish(ctx, res)
	return results(res), nil
}

// EnqueueTx adds a job inside the caller's transaction — a pgx.Tx for PostgreSQL, a
// *sql.Tx from the SQLite driver's DB() — so the job exists if and only if that
// transaction commits.
//
// An error that reached the database leaves a pgx.Tx aborted, as any failed
// statement in it does, so its work cannot commit without the job: roll it
// back (a transaction whose search_path does not lead to the driver's tables
// is refused so too). A *sql.Tx of SQLite is left as it was, without the job.
func (c *Client) EnqueueTx(ctx context.Context, tx any, kind string, args any, opts *EnqueueOpts) (*EnqueueResult, error) {
	res, err := c.EnqueueManyTx(ctx, tx, []EnqueueParams{{Kind: kind, Args: args, Opts: opts}})
	if err != nil {
		return nil, err
	}
	return &res[0], nil
}

// EnqueueManyTx is EnqueueMany inside the caller's transaction.
func (c *Client) EnqueueManyTx(ctx context.Context, tx any, params []EnqueueParams) ([]EnqueueResult, error) {
	ips, err := c.prepare(params)
	if err != nil {
		return nil, err
	}
	res, err := c.drv.JobInsertManyTx(ctx, tx, ips)
	if err != nil {
		return nil, err
	}
	// The pointers go out before the caller commits (neither pgx.Tx nor
	// sql.Tx has a commit hook). On SQLite a claim they wake waits for the
	// caller's transaction, which holds the write connection (in this
	// process; the file's write lock, for up to busy_timeout, in another),
	// and then finds the jobs. On PostgreSQL a claim they wake finds nothing
	// and acks them; the driver's NOTIFY, sent in the caller's transaction,
	// wakes the workers when it commits, and polling finds the jobs anyway.
	c.publish(ctx, res)
	return results(res), nil
}

// publish sends a wake-up pointer per new job that is ready now. A failure is
// logged, not returned: the jobs are stored, and wake-ups are only hints.
//
// A job is ready now when its run_at is not after its created_at: both are
// the database's clock, which claims compare run_at with. This process's clock
// may run behind the database's, and then took every job enqueued for now for
// a scheduled one (helper-86): no pointer, and the job waited for a poll.
func (c *Client) publish(ctx context.Context, res []driver.InsertResult) {
	if c.cfg.Wakeups == nil {
		return
	}
	var ps []wakeup.Pointer
	for _, r := range res {
		if j := r.Job; !r.Existing && j.Status == lifecycle.StatusQueued && !j.RunAt.After(j.CreatedAt) {
			ps = append(ps, wakeup.Pointer{Queue: j.Queue, JobID: j.ID})
		}
	}
	if len(ps) == 0 {
		return
	}
	if err := publishSafely(ctx, c.cfg.Wakeups, ps); err != nil {
		c.log.Warn("publishing wake-ups failed; workers will find the jobs by polling", "err", err)
	}
}

// publishSafely is t.Publish with a panic turned into an error: a transport
// is user code, and its pointers only hints. A panic there failed an Enqueue
// whose jobs were stored (its caller would enqueue them again) or ended the
// engine's process.
func publishSafely(ctx context.Context, t wakeup.Transport, ps []wakeup.Pointer) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("wake-up transport panicked: %v", r)
		}
	}()
	return t.Publish(ctx, ps)
}

func (c *Client) prepare(params []EnqueueParams) ([]driver.InsertParams, error) {
	if len(params) == 0 {
		return nil, driver.Invalid("jobs", "nothing to enqueue")
	}
	ips := make([]driver.InsertParams, len(params))
	for i, p := range params {
		ip, err := c.insertParams(p)
		if err != nil {
			if len(params) > 1 {
				return nil, fmt.Errorf("jobs[%d]: %w", i, err)
			}
			return nil, err
		}
		ips[i] = ip
	}
	return ips, nil
}

func results(res []driver.InsertResult) []EnqueueResult {
	out := make([]EnqueueResult, len(res))
	for i, r := range res {
		out[i] = EnqueueResult{Job: r.Job, Existing: r.Existing}
	}
	return out
}

// Get returns a job by id, or ErrNotFound.
func (c *Client) Get(ctx context.Context, id int64) (*Job, error) { return c.drv.JobGet(ctx, id) }

// List returns jobs matching p, newest first unless p.Ascending.
func (c *Client) List(ctx context.Context, p ListParams) ([]*Job, error) {
	if err := checkList(p); err != nil {
		return nil, err
	}
	return c.drv.JobList(ctx, p)
}

// checkList refuses a filter no job can match, naming it, as the HTTP API
// does: a misspelt queue ("emails ") listed and purged nothing, which read as
// an empty queue, a status no job has ("dead", "Failed") listed nothing, and a
// negative limit or cursor was taken for the default.
// Empty and zero still mean "any" and "the default".
func checkList(p ListParams) error {
	if p.Queue != "" {
		if err := driver.ValidateName("queue", p.Queue); err != nil {
			return err
		}
	}
	if p.Kind != "" {
		if err := driver.ValidateName("kind", p.Kind); err != nil {
			return err
		}
	}
	for _, s := range p.Statuses {
		if _, err := lifecycle.ParseStatus(string(s)); err != nil {
			return driver.Invalid("status", "%v", err)
		}
	}
	if p.Limit < 0 {
		return driver.Invalid("limit", "%d is negative (0: the default, 100)", p.Limit)
	}
	if p.AfterID < 0 {
		return driver.Invalid("after_id", "%d is negative; no job has such an id (0: from the start)", p.AfterID)
	}
	if p.MaxBytes < 0 {
		return driver.Invalid("max_bytes", "%d is negative (0: no bound but the limit)", p.MaxBytes)
	}
	return nil
}

// Events returns a job's transition log.
func (c *Client) Events(ctx context.Context, id int64) ([]lifecycle.Event, error) {
	return c.drv.JobEvents(ctx, id)
}

// Cancel cancels a job that has not finished. A running handler sees its context
// canceled at its worker's next heartbeat (WorkerConfig.HeartbeatInterval, by
// default a third of the lease: up to 10 s), and the job stays canceled
// whatever the handler then returns. A finished job gives ErrInvalidTransition.
func (c *Client) Cancel(ctx context.Context, id int64) (*Job, error) {
	return c.drv.JobCancel(ctx, driver.CancelParams{ID: id, Actor: "operator"})
}

// DLQList lists failed jobs (the dead-letter queue) with their error history,
// newest first: at most limit (0: 100), older than afterID (0: from the newest;
// the last ID of a page gives the next).
func (c *Client) DLQList(ctx context.Context, queue string, afterID int64, limit int) ([]*Job, error) {
	p := driver.ListParams{Statuses: []lifecycle.Status{lifecycle.StatusFailed}, Queue: queue, AfterID: afterID, Limit: limit}
	if err := checkList(p); err != nil {
		return nil, err
	}
	return c.drv.JobList(ctx, p)
}

// DLQRequeue enqueues a new job copying failed job id, with RetryOf = id. The
// failed job stays as the record. It is requeued at most once: a repeat returns
// the job the first call created, with Replayed set.
func (c *Client) DLQRequeue(ctx context.Context, id int64) (*Job, error) {
	return c.drv.JobDLQRequeue(ctx, driver.DLQRequeueParams{ID: id, Actor: "operator"})
}

// DLQPurge deletes failed jobs, of one queue or ("") all; it returns how many.
// On an error it returns how many were deleted before it: SQLite deletes in
// batches of its own transactions, and those that committed stay deleted
// (PostgreSQL deletes in one statement: none).
func (c *Client) DLQPurge(ctx context.Context, queue string) (int, error) {
	if err := checkList(driver.ListParams{Queue: queue}); err != nil {
		return 0, err
	}
	return c.drv.JobDLQPurge(ctx, driver.DLQPurgeParams{Queue: queue})
}

// Queues lists queues with their job counts per status.
func (c *Client) Queues(ctx context.Context) ([]QueueInfo, error) { return c.drv.QueueList(ctx) }

// PauseQueue stops workers from claiming jobs of the queue. A queue needs no
// jobs to be paused (so one can be paused before its first job), so a name
// that matches none is not an error: check it against Queues.
func (c *Client) PauseQueue(ctx context.Context, name string) error {
	return c.drv.QueuePause(ctx, name)
}

// ResumeQueue lets workers claim from the queue again.
func (c *Client) ResumeQueue(ctx context.Context, name string) error {
	return c.drv.QueueResume(ctx, name)
}
