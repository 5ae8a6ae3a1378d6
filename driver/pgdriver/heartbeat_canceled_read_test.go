package pgdriver_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/driver"
)

// holderReadFails makes the heartbeat's second read, whether the holder's
// attempt was canceled (JobCanceledHolder: its text names cancel_token),
// run on a context already canceled while fail is set: the read fails as a
// heartbeat's does when its deadline runs out between its two reads.
type holderReadFails struct{ fail atomic.Bool }

func (h *holderReadFails) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if h.fail.Load() && strings.Contains(data.SQL, "cancel_token = $3") {
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		return ctx
	}
	return ctx
}

func (h *holderReadFails) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The heartbeat of a canceled job's holder whose read of the cancel fails
// (its deadline ran out between the fenced statement and that read) is a
// failed heartbeat, which the worker tries again, and not a lost lease: it
// was answered ErrLeaseLost, and the worker counted a lost lease, which an
// operator alerts on, for a cancel (TestWorkerCancelRunningJob saw it under
// load, with heartbeats 50 ms apart). The next heartbeat, read to its end,
// is told of the cancel.
func TestHeartbeatOfACanceledJobWhoseReadFailsIsNoLostLease(t *testing.T) {
	ctx := context.Background()
	hook := &holderReadFails{}
	d, j := runningJobTraced(t, hook)
	if _, err := d.JobCancel(ctx, driver.CancelParams{ID: j.ID, Actor: "operator"}); err != nil {
		t.Fatal(err)
	}
	fence := driver.HeartbeatParams{FenceParams: driver.FenceParams{ID: j.ID, Attempt: j.Attempt, LeaseToken: j.LeaseToken}}

	hook.fail.Store(true)
	res, err := d.JobHeartbeat(ctx, fence)
	hook.fail.Store(false)
	if err == nil || errors.Is(err, driver.ErrLeaseLost) || res.CancelRequested {
		t.Errorf("heartbeat of the canceled job's holder, its read of the cancel failing: %+v, %v; want an error that is not ErrLeaseLost", res, err)
	}

	res, err = d.JobHeartbeat(ctx, fence)
	if err != nil || !res.CancelRequested {
		t.Errorf("heartbeat of the canceled job's holder: %+v, %v; want cancel_requested", res, err)
	}
}
