package sqlitedriver

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// Actors recorded in events when the call does not name one.
const (
	actorClient   = "client"
	actorOperator = "operator"
	actorEngine   = "engine"
)

// leaseActor is the actor of a claim or lease-holder transition: the worker that
// holds the lease, as "worker:<owner>" (the same spelling as pgdriver).
func leaseActor(owner string) string { return "worker:" + owner }

// appendEvent records the transition op took from → after.Status. The event's seq
// is after.Rev, so the event and the row's rev move together. An edge the
// lifecycle table does not allow is a driver bug and fails the transaction.
func appendEvent(ctx context.Context, tx *sql.Tx, op lifecycle.Op, from lifecycle.Status, after *driver.Job, at time.Time, actor, requestID string) error {
	t, ok := lifecycle.Lookup(op, from, after.Status)
	if !ok {
		return fmt.Errorf("job %d: %w", after.ID, lifecycle.Check(op, from, after.Status))
	}
	_, err := tx.ExecContext(ctx, queries.Get("EventInsert"),
		sql.Named("job_id", after.ID),
		sql.Named("seq", after.Rev),
		sql.Named("type", string(t.Event)),
		sql.Named("from_status", nullString(string(from))),
		sql.Named("to_status", string(after.Status)),
		sql.Named("at", micros(at)),
		sql.Named("actor", actor),
		sql.Named("request_id", nullString(requestID)),
		sql.Named("attempt", after.Attempt),
	)
	if err != nil {
		return fmt.Errorf("job %d: append %s event: %w", after.ID, t.Event, err)
	}
	return nil
}

// requestSeen returns job jobID as job reads it if its log holds requestID,
// else nil. Only a call of the same kind (one of ops) is a repeat, and a lease
// holder's call (attempt > 0) only at the attempt that logged requestID; any
// other is refused (driver.CheckRepeat, which judges a fail by the job).
func requestSeen(ctx context.Context, q querier, jobID int64, requestID string, ops []lifecycle.Op, attempt int,
	job func() (*driver.Job, error)) (*driver.Job, error) {
	if requestID == "" {
		return nil, nil
	}
	var usedBy int
	var logged string
	err := q.QueryRowContext(ctx, queries.Get("EventRequestSeen"),
		sql.Named("request_id", requestID), sql.Named("job_id", jobID)).Scan(&usedBy, &logged)
	switch {
	case err == sql.ErrNoRows:
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("job %d: look up request_id: %w", jobID, err)
	}
	j, err := job()
	if err != nil {
		return nil, err
	}
	if err := driver.CheckRepeat(requestID, j, logged, usedBy, ops, attempt); err != nil {
		return nil, err
	}
	return driver.RepeatAnswer(j, ops, attempt)
}

// JobEvents returns the job's events ordered by seq; ErrNotFound if the job does
// not exist (every existing job has at least its enqueue event).
func (d *Driver) JobEvents(ctx context.Context, id int64) ([]lifecycle.Event, error) {
	rows, err := d.read.QueryContext(ctx, queries.Get("EventList"), sql.Named("job_id", id))
	if err != nil {
		return nil, fmt.Errorf("events of job %d: %w", id, err)
	}
	defer rows.Close()
	events := []lifecycle.Event{}
	for rows.Next() {
		var e lifecycle.Event
		var typ, from, to string
		var at int64
		if err := rows.Scan(&e.JobID, &e.Seq, &typ, &from, &to, &at, &e.Actor, &e.RequestID, &e.Attempt); err != nil {
			return nil, fmt.Errorf("events of job %d: %w", id, err)
		}
		e.Type, e.From, e.To, e.At = lifecycle.EventType(typ), lifecycle.Status(from), lifecycle.Status(to), fromMicros(at)
		events = append(events, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("events of job %d: %w", id, err)
	}
	if len(events) == 0 {
		if _, err := d.JobGet(ctx, id); err != nil {
			return nil, err
		}
	}
	return events, nil
}

// keptClaim is the claim event a running job's row holds (claim_seq,
// migration 009): a worker's claim that started the job keeps it there rather
// than in drover_job_events. A statement that ends the claim any other way than
// a completion without a request_id clears claim_seq, and its caller writes the
// event out in the same transaction: read before the statement (which clears
// owner too), written after it moved the row (migration 010 says why this is
// not a trigger). Nil when the row holds none.
type keptClaim struct {
	seq, at int64
	actor   string
	attempt int
}

// readKeptClaim reads the kept claim event of job id, which is leaving status
// from: nil unless from is running (only a running row holds one) and the row
// holds one.
func readKeptClaim(ctx context.Context, tx *sql.Tx, id int64, from lifecycle.Status) (*keptClaim, error) {
	if from != lifecycle.StatusRunning {
		return nil, nil
	}
	var k keptClaim
	err := tx.QueryRowContext(ctx, queries.Get("ClaimKept"), sql.Named("id", id)).Scan(&k.seq, &k.at, &k.actor, &k.attempt)
	if err == sql.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("job %d: read the claim's kept event: %w", id, err)
	}
	return &k, nil
}

// writeOut logs the kept claim event of job id as the row a starting claim
// writes (claimed, to_status running: readers unfold it into claimed and
// started). A nil k writes nothing.
func (k *keptClaim) writeOut(ctx context.Context, tx *sql.Tx, id int64) error {
	if k == nil {
		return nil
	}
	_, err := tx.ExecContext(ctx, queries.Get("EventInsert"),
		sql.Named("job_id", id),
		sql.Named("seq", k.seq),
		sql.Named("type", string(lifecycle.EventClaimed)),
		sql.Named("from_status", string(lifecycle.StatusQueued)),
		sql.Named("to_status", string(lifecycle.StatusRunning)),
		sql.Named("at", k.at),
		sql.Named("actor", k.actor),
		sql.Named("request_id", nil),
		sql.Named("attempt", k.attempt),
	)
	if err != nil {
		return fmt.Errorf("job %d: write out the claim's kept event: %w", id, err)
	}
	return nil
}
