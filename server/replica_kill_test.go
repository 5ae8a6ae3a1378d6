package server

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
)

// claimHeldOpen is a replica's real driver whose claims with a request_id
// stop after taking their jobs and before they commit (where the claim asks
// whether its worker left) until release is closed, after closing entered.
type claimHeldOpen struct {
	driver.Driver
	entered, release chan struct{}
}

func (d *claimHeldOpen) JobClaim(ctx context.Context, p driver.ClaimParams) ([]*driver.Job, error) {
	if p.RequestID != "" && p.Abandoned != nil {
		left := p.Abandoned
		p.Abandoned = func() bool {
			close(d.entered)
			<-d.release
			return left()
		}
	}
	return d.Driver.JobClaim(ctx, p)
}

// A replica that dies in the middle of a claim (its database sessions end, as
// a SIGKILL ends them) leaves nothing leased: the worker's resend of the
// claim at another replica, the load balancer having answered it a 502, is
// not kept waiting by the dead replica's lock on its request_id, and claims
// the job at its first attempt and execution.
func TestClaimOfAReplicaThatDiesMidClaim(t *testing.T) {
	ctx := context.Background()
	url := testdb.URL(t, "postgres")
	held := &claimHeldOpen{entered: make(chan struct{}), release: make(chan struct{})}
	a := startReplica(t, url, func(d driver.Driver) driver.Driver { held.Driver = d; return held }, Config{})
	b := startReplica(t, url, nil, Config{})
	if _, err := b.c.Enqueue(ctx, "k", nil, &drover.EnqueueOpts{MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	const claim = `{"worker_id":"w1","queues":["default"],"request_id":"R-killed"}`
	first := make(chan error, 1)
	go func() { _, _, err := a.send(ctx, "/internal/task-claim", claim); first <- err }()
	<-held.entered // replica A has taken the job, not committed

	conn := testdb.Connect(ctx, t)
	defer conn.Close(ctx)
	var killed int
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND classid = $1 AND objid = (hashtext($2)::bigint & 4294967295)::oid`,
		0x64636c, "R-killed").Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != 1 {
		t.Fatalf("%d sessions hold the claim's lock, want replica A's one", killed)
	}

	ans := b.claim(ctx, t, claim)
	close(held.release)
	if err := <-first; err != nil {
		t.Logf("replica A's claim: %v", err)
	}
	if len(ans.Tasks) != 1 || ans.Replayed {
		t.Fatalf("the resend at replica B: %+v, want the job claimed afresh", ans)
	}
	tk := ans.Tasks[0]
	j, err := b.c.Get(ctx, tk.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != drover.StatusRunning || j.Attempt != 1 || j.Executions != 1 || j.Owner != "w1" || tk.Attempt != 1 {
		t.Errorf("job %s, attempt %d, executions %d, owner %q (task attempt %d); want running at attempt 1, execution 1, held by w1",
			j.Status, j.Attempt, j.Executions, j.Owner, tk.Attempt)
	}
	if code, body := b.post(ctx, t, "/internal/task-complete", fmt.Sprintf(`{%s,"status":"succeeded","request_id":"C-killed"}`, fenceOf(tk))); code != http.StatusOK {
		t.Errorf("report at replica B: %d %s", code, body)
	}
}
