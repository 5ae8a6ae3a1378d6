package sqlitedriver

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"

	"github.com/drover-dev/drover/driver"
)

// Batches reach SQLite as bound parameters, not as JSON: a statement holds the
// marker rowsMarker where a VALUES list of the batch's rows goes, and its
// per-call values as plain ? placeholders before the marker (a CTE of one row),
// so every parameter is anonymous and numbered by position. (Numbered ?NNN
// parameters would not do: SQLite finds each one's name by a linear search,
// which made binding a chunk quadratic.) Decoding a JSON batch with json_each
// and ->> cost ~5 µs a row, a quarter of the writer's CPU in a burn-down;
// bound VALUES rows cost ~1.7 µs.
//
// A batch runs in chunks whose sizes come from chunkSizes, largest first, so a
// statement has a few shapes the connection prepares once and keeps; the
// largest keeps every chunk well below SQLite's 32,766 parameters.
const rowsMarker = "/*rows*/"

var chunkSizes = [...]int{256, 64, 16, 4, 1}

// batchStmt is one statement of a chunked batch.
type batchStmt struct {
	name    string // query name in queries/*.sql
	cols    int    // values per row
	scalars []any  // the ? before the rows, the same for every chunk
	idsOnly bool   // the statement's RETURNING * answers id and queue only
}

// chunkedQueries caches the text of each (query, chunk size), built once.
var chunkedQueries sync.Map // chunkKey → string

type chunkKey struct {
	name    string
	rows    int
	idsOnly bool
}

// text returns the statement with rows rows of placeholders in its marker.
func (s batchStmt) text(rows int) string {
	key := chunkKey{s.name, rows, s.idsOnly}
	if q, ok := chunkedQueries.Load(key); ok {
		return q.(string)
	}
	q := queries.Get(s.name)
	at := strings.Index(q, rowsMarker)
	if at < 0 || placeholders(q[:at]) != len(s.scalars) || placeholders(q[at:]) != 0 {
		panic(fmt.Sprintf("sqlitedriver: query %s needs its %d values as ? before one %s marker", s.name, len(s.scalars), rowsMarker))
	}
	row := "(" + strings.Repeat("?,", s.cols-1) + "?)"
	q = q[:at] + strings.Repeat(row+",", rows-1) + row + q[at+len(rowsMarker):]
	if s.idsOnly {
		if strings.Count(q, "RETURNING *") != 1 {
			panic(fmt.Sprintf("sqlitedriver: query %s needs one RETURNING * to answer ids only", s.name))
		}
		q = strings.Replace(q, "RETURNING *", "RETURNING id, queue", 1)
	}
	chunkedQueries.Store(key, q)
	return q
}

// placeholders counts the ? parameters of SQL text q: a ? in a -- comment or a
// quoted string is not one.
func placeholders(q string) int {
	n := 0
	for i := 0; i < len(q); i++ {
		switch q[i] {
		case '?':
			n++
		case '-':
			if i+1 < len(q) && q[i+1] == '-' {
				for i < len(q) && q[i] != '\n' {
					i++
				}
			}
		case '\'', '"':
			if end := strings.IndexByte(q[i+1:], q[i]); end >= 0 {
				i += end + 1
			}
		}
	}
	return n
}

// chunks calls run once per chunk of vals (len(vals)/s.cols rows, row after
// row), in order, with the chunk's statement and arguments.
func (s batchStmt) chunks(vals []any, run func(query string, args []any) error) error {
	if len(vals)%s.cols != 0 {
		return fmt.Errorf("%s: %d values do not make rows of %d", s.name, len(vals), s.cols)
	}
	n := len(vals) / s.cols
	for start := 0; start < n; {
		size := chunkSizes[len(chunkSizes)-1]
		for _, c := range chunkSizes {
			if c <= n-start {
				size = c
				break
			}
		}
		args := make([]any, 0, len(s.scalars)+size*s.cols)
		args = append(args, s.scalars...)
		args = append(args, vals[start*s.cols:(start+size)*s.cols]...)
		if err := run(s.text(size), args); err != nil {
			return err
		}
		start += size
	}
	return nil
}

// exec runs the statement over every row of vals.
func (s batchStmt) exec(ctx context.Context, tx *sql.Tx, vals []any) error {
	return s.chunks(vals, func(q string, args []any) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	})
}

// queryJobs runs the statement over every row of vals and returns the job rows
// of all chunks, chunk after chunk.
func (s batchStmt) queryJobs(ctx context.Context, tx *sql.Tx, vals []any) ([]*driver.Job, error) {
	var jobs []*driver.Job
	err := s.chunks(vals, func(q string, args []any) error {
		js, err := queryJobs(ctx, tx, q, args...)
		jobs = append(jobs, js...)
		return err
	})
	return jobs, err
}

// queryIDs runs an idsOnly statement over every row of vals and returns the
// ids of all chunks, and their jobs' queues (for the counts).
func (s batchStmt) queryIDs(ctx context.Context, tx *sql.Tx, vals []any) (ids []int64, queues []string, err error) {
	err = s.chunks(vals, func(q string, args []any) error {
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var queue string
			if err := rows.Scan(&id, &queue); err != nil {
				return err
			}
			ids, queues = append(ids, id), append(queues, queue)
		}
		return rows.Err()
	})
	return ids, queues, err
}
