package sqlitedriver

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"

	"github.com/drover-dev/drover/lifecycle"
)

// counts gathers what one statement changed in the job counts (migration 013:
// drover_job_counts), by queue and status, for write to add in the
// statement's transaction. A claim or a completion of hundreds of jobs of one
// queue adds two rows.
type counts map[countKey]int

type countKey struct {
	queue  string
	status lifecycle.Status
}

// move counts a job of queue that went from one status to another.
func (c counts) move(queue string, from, to lifecycle.Status) {
	if from == to {
		return
	}
	c[countKey{queue, from}]--
	c[countKey{queue, to}]++
}

// add counts n jobs of queue that came into status (n < 0: left it).
func (c counts) add(queue string, status lifecycle.Status, n int) {
	c[countKey{queue, status}] += n
}

// write adds c to drover_job_counts, in one statement, in tx.
func (c counts) write(ctx context.Context, tx *sql.Tx) error {
	keys := make([]countKey, 0, len(c))
	for k, n := range c {
		if n != 0 {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	sort.Slice(keys, func(i, j int) bool { // in one order, whatever the map's
		if keys[i].queue != keys[j].queue {
			return keys[i].queue < keys[j].queue
		}
		return keys[i].status < keys[j].status
	})
	args := make([]any, 0, 3*len(keys))
	for _, k := range keys {
		args = append(args, k.queue, string(k.status), c[k])
	}
	q := "INSERT INTO drover_job_counts (queue, status, n) VALUES " +
		strings.Repeat("(?, ?, ?), ", len(keys)-1) + "(?, ?, ?) " +
		"ON CONFLICT (queue, status) DO UPDATE SET n = n + excluded.n"
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("keep the job counts: %w", err)
	}
	return nil
}

// moveCount is counts.move and write for one job.
func moveCount(ctx context.Context, tx *sql.Tx, queue string, from, to lifecycle.Status) error {
	if from == to {
		return nil
	}
	c := counts{}
	c.move(queue, from, to)
	return c.write(ctx, tx)
}
