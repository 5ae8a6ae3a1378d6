package drover_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/pgdriver"
	"github.com/drover-dev/drover/driver/sqlitedriver"
	"github.com/drover-dev/drover/internal/testdb"
)

type greetArgs struct {
	Name  string   `json:"name"`
	Times int      `json:"times"`
	Tags  []string `json:"tags"`
}

func TestClientEnqueueDefaults(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ctx := context.Background()
		args := greetArgs{Name: "ada", Times: 3, Tags: []string{"a", "b"}}
		res, err := c.Enqueue(ctx, "greet", args, nil)
		if err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		if res.Existing {
			t.Errorf("Existing = true for a first enqueue, want false")
		}
		for _, j := range []*drover.Job{res.Job, getJob(t, c, res.Job.ID)} {
			if j.Kind != "greet" || j.Queue != drover.DefaultQueue || j.Status != drover.StatusQueued ||
				j.MaxAttempts != drover.DefaultMaxAttempts || j.Attempt != 0 || j.Executions != 0 ||
				j.Rev != 1 || j.Priority != 0 {
				t.Errorf("got kind=%q queue=%q status=%s max_attempts=%d attempt=%d executions=%d rev=%d priority=%d, "+
					"want greet default queued 25 0 0 1 0",
					j.Kind, j.Queue, j.Status, j.MaxAttempts, j.Attempt, j.Executions, j.Rev, j.Priority)
			}
			if j.Result != nil || j.Error != "" || len(j.Errors) != 0 || j.Owner != "" || j.LeaseExpiresAt != nil {
				t.Errorf("new job carries run state: %s owner=%q lease=%v", describe(j), j.Owner, j.LeaseExpiresAt)
			}
			if d := time.Since(j.RunAt); d < -time.Minute || d > time.Minute {
				t.Errorf("run_at = %s, want about now", j.RunAt)
			}
			var got greetArgs
			if err := json.Unmarshal(j.Args, &got); err != nil {
				t.Fatalf("decode args %s: %v", j.Args, err)
			}
			if got.Name != args.Name || got.Times != args.Times || strings.Join(got.Tags, ",") != "a,b" {
				t.Errorf("args round-trip: got %+v, want %+v", got, args)
			}
		}

		// The other accepted forms of args, and nil (an empty object).
		for name, a := range map[string]any{
			"map":        map[string]any{"x": 1.0},
			"raw":        json.RawMessage(`{"x": 1}`),
			"bytes":      []byte(`{"x":1}`),
			"raw string": `{"x":1}`,
		} {
			j := enqueue(t, c, "forms", a, nil)
			wantJSON(t, name+" args", getJob(t, c, j.ID).Args, map[string]any{"x": 1})
		}
		j := enqueue(t, c, "forms", nil, nil)
		wantJSON(t, "nil args", getJob(t, c, j.ID).Args, map[string]any{})

		// Options are stored as given.
		runAt := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
		j = enqueue(t, c, "opts", nil, &drover.EnqueueOpts{
			Queue: "mail", Priority: 4, RunAt: runAt, MaxAttempts: 7, Timeout: 1500 * time.Millisecond,
			Metadata: map[string]string{"trace": "t1"},
		})
		j = getJob(t, c, j.ID)
		if j.Queue != "mail" || j.Priority != 4 || !j.RunAt.Equal(runAt) || j.MaxAttempts != 7 || j.Timeout != 1500*time.Millisecond {
			t.Errorf("got queue=%q priority=%d run_at=%s max_attempts=%d timeout=%s, want mail 4 %s 7 1.5s",
				j.Queue, j.Priority, j.RunAt, j.MaxAttempts, j.Timeout, runAt)
		}
		wantJSON(t, "metadata", j.Metadata, map[string]string{"trace": "t1"})

		// Empty metadata is none, on either driver and inside a transaction:
		// PostgreSQL refused '' as jsonb, and the error aborted the caller's
		// transaction.
		for name, m := range map[string]any{"string": "", "raw": json.RawMessage{}, "bytes": []byte{}} {
			tx, commit, rollback := beginTx(t, c)
			res, err := c.EnqueueTx(context.Background(), tx, "empty-metadata", nil, &drover.EnqueueOpts{Metadata: m})
			if err != nil {
				_ = rollback()
				t.Fatalf("EnqueueTx with empty %s metadata: %v", name, err)
			}
			if err := commit(); err != nil {
				t.Fatalf("commit after EnqueueTx with empty %s metadata: %v", name, err)
			}
			if got := getJob(t, c, res.Job.ID).Metadata; len(got) != 0 && string(got) != "null" {
				t.Errorf("empty %s metadata stored as %s, want none", name, got)
			}
		}
	})
}

func TestClientDefaultMaxAttemptsConfig(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, &drover.Config{DefaultMaxAttempts: 3})
		if j := enqueue(t, c, "k", nil, nil); j.MaxAttempts != 3 {
			t.Errorf("max_attempts = %d with Config.DefaultMaxAttempts 3, want 3", j.MaxAttempts)
		}
	})
	// Above the column's bound it was taken, and every enqueue without its own
	// max_attempts then failed on a field its caller never set (helper-39).
	for _, n := range []int{-1, math.MaxInt32 + 1} {
		if _, err := drover.NewClient(testdb.Open(t, "sqlite"), &drover.Config{DefaultMaxAttempts: n}); err == nil {
			t.Errorf("NewClient with DefaultMaxAttempts %d: no error, want invalid default_max_attempts", n)
		} else {
			wantInvalid(t, err, "default_max_attempts")
		}
	}
	// A negative limit was taken as the 1 MiB default without a word.
	if _, err := drover.NewClient(testdb.Open(t, "sqlite"), &drover.Config{MaxPayloadBytes: -1}); err == nil {
		t.Error("NewClient with MaxPayloadBytes -1: no error, want invalid max_payload_bytes")
	} else {
		wantInvalid(t, err, "max_payload_bytes")
	}
}

func TestEnqueueRejectsBadInput(t *testing.T) {
	big := `{"blob":"` + strings.Repeat("x", 10<<20) + `"}`
	cases := []struct {
		name  string
		kind  string
		args  any
		opts  *drover.EnqueueOpts
		field string
	}{
		{"empty kind", "", nil, nil, "kind"},
		{"kind with a space", "has space", nil, nil, "kind"},
		{"kind too long", strings.Repeat("k", 129), nil, nil, "kind"},
		{"bad queue", "k", nil, &drover.EnqueueOpts{Queue: "a/b"}, "queue"},
		{"args array", "k", json.RawMessage(`[1]`), nil, "args"},
		{"args string", "k", json.RawMessage(`"x"`), nil, "args"},
		{"args number", "k", json.RawMessage(`3`), nil, "args"},
		{"args Go slice", "k", []int{1}, nil, "args"},
		{"args Go number", "k", 3, nil, "args"},
		{"args invalid JSON", "k", `{"a":`, nil, "args"},
		{"args unencodable", "k", map[string]any{"f": func() {}}, nil, "args"},
		{"metadata array", "k", nil, &drover.EnqueueOpts{Metadata: []int{1}}, "metadata"},
		{"negative priority", "k", nil, &drover.EnqueueOpts{Priority: -1}, "priority"},
		{"negative max attempts", "k", nil, &drover.EnqueueOpts{MaxAttempts: -2}, "max_attempts"},
		{"negative timeout", "k", nil, &drover.EnqueueOpts{Timeout: -time.Second}, "timeout"},
		{"10 MB args over the default limit", "k", big, nil, "args"},
	}
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ctx := context.Background()
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				res, err := c.Enqueue(ctx, tc.kind, tc.args, tc.opts)
				if err == nil {
					t.Fatalf("Enqueue accepted it (job %d), want an invalid %s", res.Job.ID, tc.field)
				}
				wantInvalid(t, err, tc.field)
			})
		}
		wantNoJobs(t, c)
	})
}

func TestEnqueueCustomPayloadLimit(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, &drover.Config{MaxPayloadBytes: 64})
		ctx := context.Background()
		_, err := c.Enqueue(ctx, "k", map[string]string{"s": strings.Repeat("x", 100)}, nil)
		wantInvalid(t, err, "args")
		if err != nil && !strings.Contains(err.Error(), "64") {
			t.Errorf("error %q does not state the limit 64", err)
		}
		// Args and metadata count together.
		_, err = c.Enqueue(ctx, "k", map[string]string{"s": strings.Repeat("x", 30)},
			&drover.EnqueueOpts{Metadata: map[string]string{"m": strings.Repeat("y", 30)}})
		wantInvalid(t, err, "args")
		wantNoJobs(t, c)
		if _, err := c.Enqueue(ctx, "k", map[string]string{"s": "small"}, nil); err != nil {
			t.Errorf("Enqueue of a payload under the limit: %v", err)
		}
	})
}

func TestEnqueueManyIsAllOrNothing(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ctx := context.Background()
		_, err := c.EnqueueMany(ctx, []drover.EnqueueParams{
			{Kind: "ok"}, {Kind: "bad kind"}, {Kind: "ok"},
		})
		wantInvalid(t, err, "kind")
		if err != nil && !strings.HasPrefix(err.Error(), "jobs[1]: ") {
			t.Errorf("error %q does not say which item (jobs[1], from 0) was bad", err)
		}
		wantNoJobs(t, c)

		_, err = c.EnqueueMany(ctx, nil)
		wantInvalid(t, err, "jobs")

		res, err := c.EnqueueMany(ctx, []drover.EnqueueParams{
			{Kind: "a", Args: map[string]int{"i": 0}},
			{Kind: "b", Args: map[string]int{"i": 1}, Opts: &drover.EnqueueOpts{Queue: "other"}},
		})
		if err != nil {
			t.Fatalf("EnqueueMany: %v", err)
		}
		if len(res) != 2 || res[0].Job.Kind != "a" || res[1].Job.Kind != "b" || res[1].Job.Queue != "other" {
			t.Fatalf("EnqueueMany results not in input order: %+v", res)
		}
		if res[0].Job.ID == res[1].Job.ID {
			t.Errorf("both jobs got id %d", res[0].Job.ID)
		}
	})
}

func TestEnqueueIdempotencyKey(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ctx := context.Background()
		opts := &drover.EnqueueOpts{IdempotencyKey: "order-42"}
		first, err := c.Enqueue(ctx, "charge", map[string]int{"amount": 1}, opts)
		if err != nil {
			t.Fatal(err)
		}
		second, err := c.Enqueue(ctx, "charge", map[string]int{"amount": 2}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if first.Existing || !second.Existing {
			t.Errorf("Existing = %t, %t; want false, true", first.Existing, second.Existing)
		}
		if second.Job.ID != first.Job.ID {
			t.Errorf("second enqueue returned job %d, want the first job %d", second.Job.ID, first.Job.ID)
		}
		wantJSON(t, "args of the existing job", second.Job.Args, map[string]int{"amount": 1})
		jobs, err := c.List(ctx, drover.ListParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 1 {
			t.Errorf("List returned %d jobs, want 1", len(jobs))
		}
		// A batch that repeats the key inside itself also yields one job.
		res, err := c.EnqueueMany(ctx, []drover.EnqueueParams{
			{Kind: "charge", Opts: &drover.EnqueueOpts{IdempotencyKey: "batch"}},
			{Kind: "charge", Opts: &drover.EnqueueOpts{IdempotencyKey: "batch"}},
		})
		if err != nil {
			t.Fatalf("EnqueueMany with a repeated key: %v", err)
		}
		if res[0].Job.ID != res[1].Job.ID || res[0].Existing || !res[1].Existing {
			t.Errorf("repeated key in one batch: ids %d, %d existing %t, %t; want one id, false, true",
				res[0].Job.ID, res[1].Job.ID, res[0].Existing, res[1].Existing)
		}
	})
}

// beginTx begins a transaction of the kind the driver's EnqueueTx accepts and
// returns it with its commit and rollback.
func beginTx(t *testing.T, c *drover.Client) (tx any, commit, rollback func() error) {
	t.Helper()
	ctx := context.Background()
	switch d := c.Driver().(type) {
	case *pgdriver.Driver:
		ptx, err := d.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ptx, func() error { return ptx.Commit(ctx) }, func() error { return ptx.Rollback(ctx) }
	case *sqlitedriver.Driver:
		stx, err := d.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		return stx, stx.Commit, stx.Rollback
	}
	t.Fatalf("unexpected driver type %T", c.Driver())
	return nil, nil, nil
}

func TestEnqueueTx(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ctx := context.Background()

		tx, commit, _ := beginTx(t, c)
		res, err := c.EnqueueTx(ctx, tx, "in-tx", map[string]string{"k": "v"}, nil)
		if err != nil {
			t.Fatalf("EnqueueTx: %v", err)
		}
		if err := commit(); err != nil {
			t.Fatalf("commit: %v", err)
		}
		j := getJob(t, c, res.Job.ID)
		if j.Status != drover.StatusQueued || j.Kind != "in-tx" {
			t.Errorf("after commit: kind=%q status=%s, want in-tx queued", j.Kind, j.Status)
		}

		tx, _, rollback := beginTx(t, c)
		res, err = c.EnqueueTx(ctx, tx, "rolled-back", nil, nil)
		if err != nil {
			t.Fatalf("EnqueueTx: %v", err)
		}
		if err := rollback(); err != nil {
			t.Fatalf("rollback: %v", err)
		}
		if _, err := c.Get(ctx, res.Job.ID); !errors.Is(err, drover.ErrNotFound) {
			t.Errorf("Get of a job enqueued in a rolled-back tx: err = %v, want ErrNotFound", err)
		}
		jobs, err := c.List(ctx, drover.ListParams{Kind: "rolled-back"})
		if err != nil || len(jobs) != 0 {
			t.Errorf("List(kind rolled-back) = %d jobs, %v; want none", len(jobs), err)
		}

		// Validation happens before the transaction is touched.
		tx, _, rollback = beginTx(t, c)
		_, err = c.EnqueueTx(ctx, tx, "bad kind", nil, nil)
		wantInvalid(t, err, "kind")
		_ = rollback()
	})
}

func TestEnqueueTxWrongType(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		want := map[string]string{"postgres": "pgx.Tx", "sqlite": "*sql.Tx"}[kind]
		var wrong any = "not a transaction"
		if kind == "postgres" {
			wrong = &sql.Tx{} // the SQLite kind of transaction
		}
		// A typed nil (var tx *sql.Tx, never begun) panicked (helper-39).
		var typedNil any = (*sql.Tx)(nil)
		if kind == "postgres" {
			typedNil = (*pgxpool.Tx)(nil)
		}
		for _, tx := range []any{wrong, nil, typedNil} {
			_, err := c.EnqueueTx(context.Background(), tx, "k", nil, nil)
			if err == nil {
				t.Fatalf("EnqueueTx with a %T: no error, want one naming %s", tx, want)
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("EnqueueTx with a %T: error %q does not name the expected %s", tx, err, want)
			}
			// The type is named, never the value (a *sql.DB printed its pool).
			if got := fmt.Sprintf("got %T", tx); !strings.HasSuffix(err.Error(), got) {
				t.Errorf("EnqueueTx with a %T: error %q does not end %q", tx, err, got)
			}
			wantInvalid(t, err, "tx")
		}
		wantNoJobs(t, c)
	})
}

// runToEnd claims the job and ends it through the driver, as a worker would:
// succeeded when fail is false, failed permanently otherwise.
func runToEnd(t *testing.T, c *drover.Client, queue string, fail bool) *drover.Job {
	t.Helper()
	ctx := context.Background()
	d := c.Driver()
	claimed, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{queue}, Limit: 1, Owner: "t", LeaseDuration: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("JobClaim: %d jobs, %v; want 1", len(claimed), err)
	}
	fence := driver.FenceParams{ID: claimed[0].ID, Attempt: claimed[0].Attempt, LeaseToken: claimed[0].LeaseToken}
	if _, err := d.JobStart(ctx, fence); err != nil {
		t.Fatalf("JobStart: %v", err)
	}
	var j *drover.Job
	if fail {
		j, err = d.JobFail(ctx, driver.FailParams{FenceParams: fence, Error: "boom", Permanent: true})
	} else {
		j, err = d.JobComplete(ctx, driver.CompleteParams{FenceParams: fence, Result: json.RawMessage(`{"ok":true}`)})
	}
	if err != nil {
		t.Fatalf("end job %d: %v", fence.ID, err)
	}
	return j
}

func TestClientCancel(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ctx := context.Background()
		queued := enqueue(t, c, "k", nil, &drover.EnqueueOpts{Queue: "a"})
		j, err := c.Cancel(ctx, queued.ID)
		if err != nil {
			t.Fatalf("Cancel of a queued job: %v", err)
		}
		if j.Status != drover.StatusCanceled || getJob(t, c, queued.ID).Status != drover.StatusCanceled {
			t.Errorf("after Cancel: status %s, want canceled", j.Status)
		}
		if _, err := c.Cancel(ctx, queued.ID); !errors.Is(err, drover.ErrInvalidTransition) {
			t.Errorf("second Cancel: err = %v, want ErrInvalidTransition", err)
		}

		enqueue(t, c, "k", nil, &drover.EnqueueOpts{Queue: "b"})
		done := runToEnd(t, c, "b", false)
		if _, err := c.Cancel(ctx, done.ID); !errors.Is(err, drover.ErrInvalidTransition) {
			t.Errorf("Cancel of a succeeded job: err = %v, want ErrInvalidTransition", err)
		}
		if j := getJob(t, c, done.ID); j.Status != drover.StatusSucceeded {
			t.Errorf("a rejected Cancel changed the job: status %s, want succeeded", j.Status)
		}
		if _, err := c.Cancel(ctx, 1<<40); !errors.Is(err, drover.ErrNotFound) {
			t.Errorf("Cancel of a missing job: err = %v, want ErrNotFound", err)
		}
	})
}

func TestClientDLQ(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ctx := context.Background()
		orig := enqueue(t, c, "dead", map[string]int{"n": 7}, &drover.EnqueueOpts{Queue: "q1", Priority: 2, MaxAttempts: 4})
		failed := runToEnd(t, c, "q1", true)
		enqueue(t, c, "dead", nil, &drover.EnqueueOpts{Queue: "q2"})
		failed2 := runToEnd(t, c, "q2", true)
		enqueue(t, c, "alive", nil, &drover.EnqueueOpts{Queue: "q1"})

		dlq, err := c.DLQList(ctx, "", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(dlq) != 2 {
			t.Fatalf("DLQList: %d jobs, want 2", len(dlq))
		}
		dlq, err = c.DLQList(ctx, "q1", 0, 0)
		if err != nil || len(dlq) != 1 || dlq[0].ID != orig.ID {
			t.Fatalf("DLQList(q1) = %d jobs, %v; want job %d", len(dlq), err, orig.ID)
		}
		if dlq[0].Error != "boom" || len(dlq[0].Errors) != 1 || dlq[0].Errors[0].Error != "boom" {
			t.Errorf("DLQ entry lost its failure: %s", describe(dlq[0]))
		}

		re, err := c.DLQRequeue(ctx, failed.ID)
		if err != nil {
			t.Fatalf("DLQRequeue: %v", err)
		}
		if re.ID == failed.ID || re.RetryOf == nil || *re.RetryOf != failed.ID {
			t.Errorf("requeued job: id %d retry_of %v, want a new id with retry_of %d", re.ID, re.RetryOf, failed.ID)
		}
		if re.Status != drover.StatusQueued || re.Kind != "dead" || re.Queue != "q1" || re.Priority != 2 ||
			re.MaxAttempts != 4 || re.Attempt != 0 || len(re.Errors) != 0 {
			t.Errorf("requeued job: %s kind=%q queue=%q priority=%d; want a fresh copy", describe(re), re.Kind, re.Queue, re.Priority)
		}
		wantJSON(t, "requeued args", re.Args, map[string]int{"n": 7})
		if j := getJob(t, c, failed.ID); j.Status != drover.StatusFailed {
			t.Errorf("the failed record changed: status %s, want failed", j.Status)
		}
		if _, err := c.DLQRequeue(ctx, re.ID); !errors.Is(err, drover.ErrInvalidTransition) {
			t.Errorf("DLQRequeue of a queued job: err = %v, want ErrInvalidTransition", err)
		}

		n, err := c.DLQPurge(ctx, "q2")
		if err != nil || n != 1 {
			t.Errorf("DLQPurge(q2) = %d, %v; want 1", n, err)
		}
		if _, err := c.Get(ctx, failed2.ID); !errors.Is(err, drover.ErrNotFound) {
			t.Errorf("purged job still there: err = %v, want ErrNotFound", err)
		}
		n, err = c.DLQPurge(ctx, "")
		if err != nil || n != 1 {
			t.Errorf("DLQPurge(all) = %d, %v; want 1", n, err)
		}
		if dlq, _ := c.DLQList(ctx, "", 0, 0); len(dlq) != 0 {
			t.Errorf("DLQList after purge: %d jobs, want none", len(dlq))
		}
		if j := getJob(t, c, re.ID); j.Status != drover.StatusQueued {
			t.Errorf("purge touched the requeued job: status %s, want queued", j.Status)
		}
	})
}

func TestClientQueues(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ctx := context.Background()
		enqueue(t, c, "k", nil, &drover.EnqueueOpts{Queue: "q1"})
		enqueue(t, c, "k", nil, &drover.EnqueueOpts{Queue: "q1"})
		enqueue(t, c, "k", nil, &drover.EnqueueOpts{Queue: "q2"})

		queues := func() map[string]drover.QueueInfo {
			t.Helper()
			qs, err := c.Queues(ctx)
			if err != nil {
				t.Fatalf("Queues: %v", err)
			}
			m := map[string]drover.QueueInfo{}
			for _, q := range qs {
				m[q.Name] = q
			}
			return m
		}
		qs := queues()
		if len(qs) != 2 || qs["q1"].Counts[drover.StatusQueued] != 2 || qs["q2"].Counts[drover.StatusQueued] != 1 {
			t.Errorf("Queues = %+v, want q1 with 2 queued and q2 with 1", qs)
		}
		if qs["q1"].Paused {
			t.Errorf("q1 paused before PauseQueue")
		}

		if err := c.PauseQueue(ctx, "q1"); err != nil {
			t.Fatalf("PauseQueue: %v", err)
		}
		if err := c.PauseQueue(ctx, "empty"); err != nil {
			t.Fatalf("PauseQueue of a queue without jobs: %v", err)
		}
		qs = queues()
		if !qs["q1"].Paused || qs["q2"].Paused || !qs["empty"].Paused {
			t.Errorf("after pausing q1 and empty: paused q1=%t q2=%t empty=%t, want true false true",
				qs["q1"].Paused, qs["q2"].Paused, qs["empty"].Paused)
		}
		claim := func(q string) int {
			t.Helper()
			js, err := c.Driver().JobClaim(ctx, driver.ClaimParams{Queues: []string{q}, Limit: 10, Owner: "t", LeaseDuration: time.Minute})
			if err != nil {
				t.Fatalf("JobClaim(%s): %v", q, err)
			}
			return len(js)
		}
		if n := claim("q1"); n != 0 {
			t.Errorf("claimed %d jobs from paused q1, want 0", n)
		}
		if err := c.ResumeQueue(ctx, "q1"); err != nil {
			t.Fatalf("ResumeQueue: %v", err)
		}
		if queues()["q1"].Paused {
			t.Errorf("q1 still paused after ResumeQueue")
		}
		if n := claim("q1"); n != 2 {
			t.Errorf("claimed %d jobs from resumed q1, want 2", n)
		}
		wantInvalid(t, c.PauseQueue(ctx, "bad name"), "queue")
	})
}

func TestOpen(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ name, url, mention string }{
		{"empty", "  ", "empty"},
		{"unparsable postgres URL", "postgres://user:s3cret@localhost:badport/db", "parse"},
		{"bad escape", "postgresql://%zz", "parse"},
		{"unsupported scheme", "mysql://localhost/db", `"mysql"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := drover.Open(ctx, tc.url, nil)
			if err == nil {
				d.Close()
				t.Fatalf("Open(%q): no error", tc.url)
			}
			wantInvalid(t, err, "database_url")
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("Open(%q): error %q does not mention %s", tc.url, err, tc.mention)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("Open(%q): error %q leaks the password", tc.url, err)
			}
		})
	}
	forEachKind(t, func(t *testing.T, kind string) {
		url := testdb.URL(t, kind)
		if kind == "sqlite" {
			url = "sqlite://" + url
		}
		d, err := drover.Open(ctx, url, nil)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer d.Close()
		if d.Name() != kind {
			t.Errorf("Open chose driver %q, want %q", d.Name(), kind)
		}
		if err := d.MigrateUp(ctx); err != nil {
			t.Fatalf("MigrateUp: %v", err)
		}
		c, err := drover.NewClient(d, nil)
		if err != nil {
			t.Fatal(err)
		}
		enqueue(t, c, "k", nil, nil)
	})
}

// List, DLQList and DLQPurge refuse a filter no job can match, naming it, as
// the HTTP API and PauseQueue do: a misspelt queue ("emails ") listed nothing
// and purged nothing, which read as an empty queue; a negative limit or cursor
// was taken for the default.
func TestListFiltersRefusedNamingTheField(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		ctx := context.Background()
		c := newClient(t, kind, nil)
		enqueue(t, c, "k", map[string]any{}, nil)
		_, err := c.List(ctx, drover.ListParams{Queue: "emails "})
		wantInvalid(t, err, "queue")
		_, err = c.List(ctx, drover.ListParams{Kind: "no/such"})
		wantInvalid(t, err, "kind")
		_, err = c.List(ctx, drover.ListParams{Limit: -1})
		wantInvalid(t, err, "limit")
		_, err = c.List(ctx, drover.ListParams{AfterID: -5})
		wantInvalid(t, err, "after_id")
		_, err = c.List(ctx, drover.ListParams{MaxBytes: -1})
		wantInvalid(t, err, "max_bytes")
		_, err = c.DLQList(ctx, "emails ", 0, 0)
		wantInvalid(t, err, "queue")
		_, err = c.DLQList(ctx, "", -1, 0)
		wantInvalid(t, err, "after_id")
		_, err = c.DLQList(ctx, "", 0, -1)
		wantInvalid(t, err, "limit")
		_, err = c.DLQPurge(ctx, "emails ")
		wantInvalid(t, err, "queue")
		// The zero values still mean "every queue", "from the start", "the default page".
		if jobs, err := c.List(ctx, drover.ListParams{}); err != nil || len(jobs) != 1 {
			t.Fatalf("List with zero values = %d jobs, %v; want the one job", len(jobs), err)
		}
		if n, err := c.DLQPurge(ctx, ""); err != nil || n != 0 {
			t.Fatalf("DLQPurge of every queue = %d, %v; want 0", n, err)
		}
	})
}
