package pgdriver

import (
	"sync"
	"time"

	"github.com/drover-dev/drover/driver"
)

const (
	// claimCursorSpan bounds how long a queue's claims start at its cursor
	// before one scans drover_ready from the start again.
	claimCursorSpan = time.Second
	// claimCursorMinJobs is the smallest full claim that sets a cursor. A
	// worker that takes jobs by the handful keeps the strict claim order; one
	// that takes them by the hundred under a backlog starts them all at once
	// anyway.
	claimCursorMinJobs = 32
)

// claimCursors remember, per queue, where this driver's last full claim ended.
//
// A claim reads drover_ready's key in (priority, run_at, id) order from its
// start. Each job claimed leaves its entry there until VACUUM removes it: dead, and
// skipped, but still read. Between two vacuums of a busy table those entries
// fill thousands of index pages (10,000 pages, ~14 ms, a third of a claim of
// 1,000 jobs, four minutes into a continuous run), every claim reads them all
// again, and while a long transaction holds back the xmin horizon they cannot
// even be marked dead, so each costs a heap fetch. After a claim that took all
// it asked for (a backlog), the next claim of the queue starts past the last
// job it took; priorities before that job's are still read from their start.
// Only a claim of claimCursorMinJobs or more sets a cursor.
//
// A job that becomes ready behind the cursor (a run_at in the past, a stalled
// job's old run_at, an insert whose run_at was read before the claim but
// committed after it) is found by the next claim that scans from the start: at
// once when a claim from the cursor finds fewer jobs than it asked for, after
// an error, and once claimCursorSpan has passed since the last scan from the
// start. Under a backlog such a job waits at most that span longer than in
// strict (priority, run_at, id) order; nothing is skipped for good. When the
// claim from the start that tops up a short claim takes all it asks for, more
// jobs may wait behind the cursor: the cursor then goes to the last job that
// claim took, not past the jobs taken from the cursor, so the next claims take
// the rest of them in claim order before the jobs past it.
type claimCursors struct {
	mu sync.Mutex
	m  map[string]claimCursor
}

type claimCursor struct {
	priority int
	runAt    time.Time
	id       int64
	scanned  time.Time // when the claim that scanned from the start ran
}

// get answers the queue's cursor, or nil when its claim must scan from the
// start.
func (c *claimCursors) get(queue string, now time.Time) *claimCursor {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.m[queue]
	if !ok {
		return nil
	}
	if now.Before(cur.scanned) || now.Sub(cur.scanned) >= claimCursorSpan {
		delete(c.m, queue)
		return nil
	}
	return &cur
}

// update records a claim's outcome: it took n jobs of the limit it asked
// for, and the next claim starts past last (the last job it took in claim
// order, or the last that a claim from the start took, when jobs may still
// wait between that one and the end of this claim); scanned is when the claim
// that last scanned the queue from the start ran (this one's now, if it did).
func (c *claimCursors) update(queue string, scanned time.Time, n, limit int, last *driver.Job) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]claimCursor{}
	}
	if n < limit || n < claimCursorMinJobs || last == nil {
		delete(c.m, queue)
		return
	}
	c.m[queue] = claimCursor{priority: last.Priority, runAt: last.RunAt, id: last.ID, scanned: scanned}
}

// forget makes the queue's next claim scan from the start.
func (c *claimCursors) forget(queue string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, queue)
}

// args answers the claim's cursor parameters ($8, $9, $10); a nil cursor
// scans from the start.
func (cur *claimCursor) args() (int, any, int64) {
	if cur == nil {
		return 0, nil, 0
	}
	return cur.priority, cur.runAt, cur.id
}
