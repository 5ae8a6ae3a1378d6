package main

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover/driver/sqlitedriver"
)

// rawSQLiteRow is the raw baseline's loop on Drover's own job row: the table,
// CHECKs and indexes Drover's SQLite driver migrates, written by raw's three
// statements (a multi-row INSERT, a claim UPDATE of a batch, a completion
// UPDATE of a batch), each its own transaction, with no event, no fence check
// and no queue logic. Its claim sets what Drover's claim sets on the row
// (status, attempt, owner, a lease token, the lease's expiry, started_at, rev),
// its completion what Drover's completion sets, so its rate is the most any
// queue keeping Drover's row could reach on this SQLite. raw-sqlite, the
// issue's baseline, writes a three-column row with one index instead.
type rawSQLiteRow struct {
	path string
	drv  *sqlitedriver.Driver
}

func newRawSQLiteRow(dir string, k knobs) *rawSys {
	return &rawSys{label: "raw-sqlite-row", k: k, store: &rawSQLiteRow{path: filepath.Join(dir, "raw-row.db")}}
}

// The row statements; ?1 is the time in microseconds. rowClaim's ?2 is the
// batch size, rowComplete's ?2 the ids as a JSON array.
const (
	rowClaim = `UPDATE drover_jobs SET status = 'running', attempt = attempt + 1, executions = executions + 1,
    owner = 'w', lease_token = lower(hex(randomblob(16))), lease_expires_at = ?1 + 30000000,
    started_at = ?1, rev = rev + 2
WHERE id IN (SELECT id FROM drover_jobs
             WHERE queue = 'default' AND status IN ('queued','stalled') AND run_at <= ?1
             ORDER BY priority, run_at, id LIMIT ?2)
RETURNING id, args`
	rowComplete = `UPDATE drover_jobs SET status = 'succeeded', result = 'null', owner = NULL, lease_token = NULL,
    lease_expires_at = NULL, finished_at = ?1, finished_by = 'w', rev = rev + 1
WHERE id IN (SELECT value FROM json_each(?2)) AND status = 'running'`
)

func (r *rawSQLiteRow) reset(ctx context.Context) error {
	if err := r.wipe(ctx); err != nil {
		return err
	}
	d, err := sqlitedriver.Open(r.path, sqlitedriver.Options{})
	if err != nil {
		return err
	}
	r.drv = d
	return d.MigrateUp(ctx)
}

// insert writes the columns Drover's insert writes for a job with no options
// (JobInsertMany), its enqueued event kept in the row as Drover keeps it.
func (r *rawSQLiteRow) insert(ctx context.Context, seqs []int64) error {
	var b strings.Builder
	b.WriteString(`WITH p(now) AS (VALUES (?))
INSERT INTO drover_jobs (kind, queue, status, args, priority, run_at, max_attempts, created_at, enqueued_by)
SELECT 'bench', 'default', 'queued', v.column1, 0, p.now, 25, p.now, 'w' FROM (VALUES `)
	args := argsRows(&b, append(make([]any, 0, 1+len(seqs)), time.Now().UnixMicro()), seqs)
	b.WriteString(") AS v, p")
	_, err := r.drv.DB().ExecContext(ctx, b.String(), args...)
	return err
}

func (r *rawSQLiteRow) claim(ctx context.Context, n int) ([]rawJob, error) {
	rows, err := r.drv.DB().QueryContext(ctx, rowClaim, time.Now().UnixMicro(), n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return scanRawJobs(rows)
}

func (r *rawSQLiteRow) complete(ctx context.Context, ids []int64) error {
	_, err := r.drv.DB().ExecContext(ctx, rowComplete, time.Now().UnixMicro(), idsJSON(ids))
	return err
}

func (r *rawSQLiteRow) unfinished(ctx context.Context) (int64, error) {
	var n int64
	err := r.drv.DB().QueryRowContext(ctx, "SELECT count(*) FROM drover_jobs WHERE status <> 'succeeded'").Scan(&n)
	return n, err
}

func (r *rawSQLiteRow) wipe(context.Context) error {
	if r.drv != nil {
		_ = r.drv.Close()
		r.drv = nil
	}
	return removeSQLite(r.path)
}

// idsJSON is ids as a JSON array, which a statement reads with json_each.
func idsJSON(ids []int64) string {
	b := make([]byte, 0, 8*len(ids)+2)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(append(b, ']'))
}
