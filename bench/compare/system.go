package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// system is one of the queues under test. Every job it runs is a no-op whose args
// are {"seq": N}; its handler calls tracker.executedSeq(N) and the system calls
// tracker.completedSeq(N) once the job's success is durable.
type system interface {
	name() string
	// reset leaves the system with empty, freshly migrated tables.
	reset(ctx context.Context) error
	// insertBatch inserts the jobs seqs [first, first+n) in one statement.
	insertBatch(ctx context.Context, first int64, n int) error
	// insertOne inserts one job.
	insertOne(ctx context.Context, seq int64) error
	// start starts workers reporting to t; stop stops them gracefully.
	start(ctx context.Context, t *tracker) error
	stop(ctx context.Context) error
	// unfinished counts jobs in the database not (yet) successfully finished.
	unfinished(ctx context.Context) (int64, error)
	// wipe drops everything the system stored (its schema or its file) and
	// closes its connections; reset makes it usable again.
	wipe(ctx context.Context) error
	// close stops and wipes.
	close()
}

// seeder is a system whose table can be filled with backlog rows.
type seeder interface {
	// seed adds done rows in the system's own finished state and future rows
	// waiting far in the future, by copying template rows the system made itself.
	seed(ctx context.Context, done, future int64) error
}

// twinner is a system that can make a copy of itself with storage of its own
// (its schema with suffix added), reset and wiped apart from it: the backlog
// holds each size in a table of its own.
type twinner interface {
	twin(suffix string) system
}

// knobs are the worker settings shared by Drover and the raw baseline.
type knobs struct {
	concurrency     int // handler slots
	claimBatch      int // 0: Drover's default
	completionBatch int // 0: Drover's default
	pollInterval    int // ms; 0: Drover's default
}

// Values used by the raw baseline when a knob is left at 0: Drover's defaults
// (WorkerConfig: ClaimBatch 100, bounded by the free slots as raw's claims are;
// CompletionBatch 100), so that both are batched alike.
const (
	rawDefaultClaimBatch      = 100
	rawDefaultCompletionBatch = 100
)

func (k knobs) rawClaimBatch() int {
	if k.claimBatch > 0 {
		return k.claimBatch
	}
	return rawDefaultClaimBatch
}

func (k knobs) rawCompletionBatch() int {
	if k.completionBatch > 0 {
		return k.completionBatch
	}
	return rawDefaultCompletionBatch
}

// cloneRows inserts n copies of row id of schema.table (every column but id, which
// takes its default), in statements of at most 500k rows. It is setup, not
// measurement, and copying a row the system wrote itself keeps it valid whatever
// the system's columns and constraints are.
func cloneRows(ctx context.Context, pool *pgxpool.Pool, schema, table string, id, n int64) error {
	rows, err := pool.Query(ctx, `SELECT column_name FROM information_schema.columns
		WHERE table_schema = $1 AND table_name = $2 AND column_name <> 'id'
		  AND is_generated = 'NEVER' ORDER BY ordinal_position`, schema, table)
	if err != nil {
		return err
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if len(cols) == 0 {
		return fmt.Errorf("no columns found for %s.%s", schema, table)
	}
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = pgx.Identifier{c}.Sanitize()
	}
	list := strings.Join(quoted, ", ")
	tbl := pgx.Identifier{schema, table}.Sanitize()
	q := fmt.Sprintf(`INSERT INTO %s (%s) SELECT %s FROM %s t, generate_series(1, $2::bigint) WHERE t.id = $1`, tbl, list, list, tbl)
	for left := n; left > 0; {
		k := min(left, 500_000)
		tag, err := pool.Exec(ctx, q, id, k)
		if err != nil {
			return fmt.Errorf("seed %s: %w", tbl, err)
		}
		if tag.RowsAffected() != k {
			return fmt.Errorf("seed %s: copied %d rows of %d (template %d missing?)", tbl, tag.RowsAffected(), k, id)
		}
		left -= k
	}
	return nil
}

var errNotStarted = errors.New("not started")
