package pgdriver_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/lifecycle"
)

// TestBatchCompletionInEveryExecMode: a batch completion stores each result as
// given whatever the pool's default_query_exec_mode. In exec and
// simple_protocol (common behind PgBouncer) pgx sends parameters without
// their types, and the batch's arrays, which pgx otherwise encodes in binary,
// failed to encode: every job stayed running, to be reaped and run again.
func TestBatchCompletionInEveryExecMode(t *testing.T) {
	ctx := context.Background()
	results := []string{`{"s":"a \"q\" \\ é ☃","n":[1,2.5,null]}`, "", `"{braces}, commas"`, `null`}
	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			d := openURL(t, testdb.PostgresURL(t)+"&default_query_exec_mode="+mode)
			jobs := runningJobs(t, d, len(results)+1)
			var ps []driver.CompleteParams
			for i, res := range results {
				j := jobs[i]
				ps = append(ps, driver.CompleteParams{FenceParams: driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: strings.ToUpper(j.LeaseToken)},
					Result: json.RawMessage(res)})
			}
			ps[1].RequestID = "req-1"
			// An attempt past int4: refused, never wrapped onto the job's own.
			wrapped := jobs[len(results)]
			ps = append(ps, driver.CompleteParams{FenceParams: driver.FenceParams{ID: wrapped.ID, Attempt: wrapped.Attempt + math.MaxUint32 + 1, LeaseToken: wrapped.LeaseToken}})
			for round, call := range []func() []error{
				func() []error { return d.JobCompleteManyErrs(ctx, ps) },
				func() []error { // the same batch again: each done job answers as done or lost, nothing changes
					var errs []error
					for _, o := range d.JobCompleteMany(ctx, ps) {
						errs = append(errs, o.Err)
					}
					return errs
				},
			} {
				errs := call()
				if round == 0 {
					for i := range results {
						if errs[i] != nil {
							t.Errorf("completion %d: %v", i, errs[i])
						}
					}
				}
				if !errors.Is(errs[len(results)], driver.ErrLeaseLost) {
					t.Errorf("round %d: completion with attempt %d: %v, want ErrLeaseLost", round, ps[len(results)].Attempt, errs[len(results)])
				}
			}
			for i, res := range results {
				want := res
				if res == "" {
					want = "null"
				}
				g, err := d.JobGet(ctx, jobs[i].ID)
				if err != nil {
					t.Fatal(err)
				}
				if g.Status != lifecycle.StatusSucceeded || !jsonSame(g.Result, []byte(want)) {
					t.Errorf("job %d: %s with result %s, want succeeded with %s", g.ID, g.Status, g.Result, want)
				}
			}
			if g, err := d.JobGet(ctx, wrapped.ID); err != nil || g.Status != lifecycle.StatusRunning || g.Attempt != wrapped.Attempt {
				t.Errorf("job %d after a completion at attempt %d: %v %+v, want still running at attempt %d", wrapped.ID, ps[len(results)].Attempt, err, g, wrapped.Attempt)
			}
		})
	}
}

// jsonSame reports whether two JSON texts hold the same value.
func jsonSame(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return string(xs) == string(ys)
}

// TestInfiniteTimesAreRefused: a time column holding infinity (written by
// hand: the driver never writes one) fails the read, naming the column, as
// it did when pgx scanned these columns into *time.Time; read as a value it
// came back as year 1, which a heartbeat would have taken for a lease.
func TestInfiniteTimesAreRefused(t *testing.T) {
	ctx := context.Background()
	d := open(t)
	jobs := runningJobs(t, d, 1)
	for _, col := range []string{"lease_expires_at", "started_at"} {
		if _, err := d.Pool().Exec(ctx, "UPDATE drover_jobs SET "+col+" = 'infinity' WHERE id = $1", jobs[0].ID); err != nil {
			t.Fatal(err)
		}
		if g, err := d.JobGet(ctx, jobs[0].ID); err == nil || !strings.Contains(err.Error(), col) {
			t.Errorf("JobGet with %s = infinity: %+v, %v; want an error naming the column", col, g, err)
		}
		if _, err := d.Pool().Exec(ctx, "UPDATE drover_jobs SET "+col+" = now() WHERE id = $1", jobs[0].ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.JobGet(ctx, jobs[0].ID); err != nil {
		t.Errorf("JobGet with finite times again: %v", err)
	}
}
