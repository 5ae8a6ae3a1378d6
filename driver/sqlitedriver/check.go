package sqlitedriver

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// CheckInvariants compares the job counts migration 013 keeps with the jobs,
// and returns an error naming each disagreement, or nil. It reads every job
// in one read snapshot, so it is for tests and for an operator's diagnosis,
// not for a hot path. The conformance suite runs it after every test, so
// every statement that changes jobs is checked for the counts it keeps.
func (d *Driver) CheckInvariants(ctx context.Context) error {
	tx, err := d.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("check invariants: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // it only read
	read := func(name string) (map[countKey]int, error) {
		rows, err := tx.QueryContext(ctx, queries.Get(name))
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := map[countKey]int{}
		for rows.Next() {
			var k countKey
			var n int
			if err := rows.Scan(&k.queue, &k.status, &n); err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, rows.Err()
	}
	jobs, err := read("CountsOfTheJobs")
	if err != nil {
		return fmt.Errorf("check invariants: %w", err)
	}
	kept, err := read("CountsKept")
	if err != nil {
		return fmt.Errorf("check invariants: %w", err)
	}
	var errs []error
	all := maps.Clone(jobs)
	maps.Copy(all, kept)
	keys := slices.SortedFunc(maps.Keys(all), func(a, b countKey) int {
		return cmp.Or(cmp.Compare(a.queue, b.queue), cmp.Compare(a.status, b.status))
	})
	for _, k := range keys {
		if jobs[k] != kept[k] {
			errs = append(errs, fmt.Errorf("queue %q has %d %s jobs, and drover_job_counts says %d", k.queue, jobs[k], k.status, kept[k]))
		}
	}
	return errors.Join(errs...)
}
