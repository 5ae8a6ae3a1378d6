package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// checkAll reads the database, the ledger and the processes' reports, runs the
// checks and fills the summary.
func (h *harness) checkAll(ctx context.Context) error {
	hist, err := h.collect(ctx)
	if err != nil {
		return err
	}
	v := check(hist)
	s := &h.summary
	s.Jobs = len(hist.Acked)
	s.Indeterminate = v.Indeterminate
	s.Lost, s.Failed, s.Unexpected, s.Stuck = v.Lost, v.Failed, v.Unexpected, v.Stuck
	s.DupCompletions, s.FalseAcks, s.LeaseOverlaps = v.DupCompletions, v.FalseAcks, v.LeaseOverlaps
	s.EarlyStalls, s.RanAfterCancel = v.EarlyStalls, v.RanAfterCancel
	s.IllegalHistories, s.AttemptsOverMax, s.MissingEffects = v.IllegalHistories, v.AttemptsOverMax, v.MissingEffects
	s.DupEffects, s.DupViolations, s.Unleased = v.DupEffects, v.DupViolations, v.Unleased
	s.Problems = append(s.Problems, v.Examples...)

	overlaps, changes, ex := h.leaderCheck()
	s.LeaderOverlaps, s.LeaderChanges = overlaps, changes
	s.Problems = append(s.Problems, ex...)

	byID := map[int64]*driver.Job{}
	for _, j := range hist.Jobs {
		byID[j.ID] = j
	}
	for id, expect := range h.probes.expect {
		j := byID[id]
		if j == nil {
			h.probes.fail("probe job %d is gone", id)
			continue
		}
		if err := expect(j); err != nil {
			h.probes.fail("probe job %d (%s): %v", id, j.Kind, err)
		}
	}
	s.Cancels = h.cancels.acked()
	s.ProbeFailures = len(h.probes.failures)
	s.Problems = append(s.Problems, h.probes.failures...)
	s.RefusedEnqueues = h.led.refused
	if h.led.refused > 0 {
		s.Problems = append(s.Problems, fmt.Sprintf("%d valid enqueues were refused", h.led.refused))
	}

	for _, a := range hist.Acks {
		if strings.HasPrefix(a.Worker, "skew-") {
			s.SkewJobs++
		}
	}
	if h.prof.skewWorkers > 0 && s.SkewJobs == 0 {
		s.Problems = append(s.Problems, "the clock-skewed workers completed no job")
		s.ProbeFailures++
	}
	for _, p := range h.pausesDone {
		if p.rejected == 0 {
			s.Problems = append(s.Problems, fmt.Sprintf("pause of %s: no late write was seen refused", p.id))
		}
	}
	return nil
}

// collect loads everything the checker reads.
func (h *harness) collect(ctx context.Context) (*history, error) {
	hist := &history{
		Events: map[int64][]lifecycle.Event{}, Acked: h.led.acked, Attempted: h.led.attempted,
		Probes: h.probes.ids, FarFuture: h.probes.farFuture, Faults: h.faults, Lease: h.prof.lease,
		Cancels: h.cancels.sent,
	}
	var after int64
	for {
		page, err := h.drv.JobList(ctx, driver.ListParams{AfterID: after, Limit: 1000, Ascending: true})
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		hist.Jobs = append(hist.Jobs, page...)
		if len(page) == 0 {
			break
		}
		after = page[len(page)-1].ID
	}

	micros := func(col string) string {
		if h.pg != nil {
			return "(extract(epoch from " + col + ")*1000000)::bigint"
		}
		return col
	}
	// Both drivers keep three events in compact form, read here as their
	// JobEvents do: a claim that starts its jobs writes claimed and started as
	// one row (to_status 'running'), a job's enqueued event lives in its row
	// (enqueued_by: pgdriver migration 008, sqlitedriver 004), and so does a
	// succeeded event without a request_id (finished_by: 009, 005), and a
	// worker's claim while it is live (claim_seq: 012, 009).
	rows, err := h.sqlDB.QueryContext(ctx, `WITH s(d, type, from_status, to_status) AS (
VALUES (0, 'claimed', 'queued', 'claimed'), (1, 'started', 'claimed', 'running'))
SELECT job_id, seq, type, COALESCE(from_status, ''),
CASE WHEN type = 'claimed' THEN 'claimed' ELSE to_status END, `+micros("at")+`,
actor, COALESCE(request_id, ''), attempt FROM drover_job_events
UNION ALL
SELECT job_id, seq + 1, 'started', 'claimed', 'running', `+micros("at")+`, actor, '', attempt
FROM drover_job_events WHERE type = 'claimed' AND to_status = 'running'
UNION ALL
SELECT id, 1, 'enqueued', '', CASE WHEN workflow_run_id IS NULL THEN 'queued' ELSE 'pending' END,
`+micros("created_at")+`, enqueued_by, '', 0 FROM drover_jobs WHERE enqueued_by IS NOT NULL
UNION ALL
SELECT id, rev, 'succeeded', 'running', 'succeeded', `+micros("finished_at")+`, finished_by, '', attempt
FROM drover_jobs WHERE finished_by IS NOT NULL
UNION ALL
SELECT id, claim_seq + s.d, s.type, s.from_status, s.to_status, `+micros("started_at")+`,
CASE WHEN status = 'running' THEN 'worker:' || owner ELSE finished_by END, '', attempt
FROM drover_jobs CROSS JOIN s
WHERE claim_seq IS NOT NULL AND (status = 'running' OR (status = 'succeeded' AND finished_by IS NOT NULL))
ORDER BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	for rows.Next() {
		var e lifecycle.Event
		var at int64
		if err := rows.Scan(&e.JobID, &e.Seq, &e.Type, &e.From, &e.To, &at, &e.Actor, &e.RequestID, &e.Attempt); err != nil {
			rows.Close()
			return nil, err
		}
		e.At = time.UnixMicro(at)
		hist.Events[e.JobID] = append(hist.Events[e.JobID], e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}

	rows, err = h.sqlDB.QueryContext(ctx, `SELECT seq, job_id, attempt, worker_id, held, `+micros("at")+` FROM chaos_effects ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read effects: %w", err)
	}
	for rows.Next() {
		var e effect
		var at int64
		if err := rows.Scan(&e.Seq, &e.JobID, &e.Attempt, &e.Worker, &e.Held, &at); err != nil {
			rows.Close()
			return nil, err
		}
		e.At = time.UnixMicro(at)
		hist.Effects = append(hist.Effects, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}

	lines, _ := h.lines.since(0)
	for _, l := range lines {
		if len(l.Fields) == 3 && (l.Fields[0] == "ok" || l.Fields[0] == "ended") {
			id, _ := strconv.ParseInt(l.Fields[1], 10, 64)
			attempt, _ := strconv.Atoi(l.Fields[2])
			a := ack{JobID: id, Attempt: attempt, Worker: l.Proc, At: l.At}
			if l.Fields[0] == "ok" {
				hist.Acks = append(hist.Acks, a)
			} else {
				hist.Ended = append(hist.Ended, a)
			}
		}
	}
	return hist, nil
}
