package pgdriver

import (
	sqldriver "database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// jobRow mirrors drover_jobs, plus the extra columns some statements return.
type jobRow struct {
	ID             int64              `db:"id"`
	Kind           pgtype.DriverBytes `db:"kind"`     // interned (names)
	Queue          pgtype.DriverBytes `db:"queue"`    // interned
	Status         pgtype.DriverBytes `db:"status"`   // interned
	Args           pgtype.DriverBytes `db:"args"`     // copied into the result's slab
	Metadata       pgtype.DriverBytes `db:"metadata"` // copied too
	Priority       int32              `db:"priority"`
	RunAt          time.Time          `db:"run_at"`
	Attempt        int32              `db:"attempt"`
	Executions     int32              `db:"executions"`
	MaxAttempts    int32              `db:"max_attempts"`
	TimeoutMS      int64              `db:"timeout_ms"`
	IdempotencyKey *string            `db:"idempotency_key"`
	Owner          pgtype.DriverBytes `db:"owner"` // interned; NULL reads as ""
	LeaseToken     pgtype.UUID        `db:"lease_token"`
	LeaseExpiresAt pgtype.Timestamptz `db:"lease_expires_at"`
	Result         []byte             `db:"result"`
	Error          *string            `db:"error"`
	Errors         []byte             `db:"errors"`
	CreatedAt      time.Time          `db:"created_at"`
	StartedAt      pgtype.Timestamptz `db:"started_at"`
	FinishedAt     pgtype.Timestamptz `db:"finished_at"`
	Rev            int64              `db:"rev"`
	RetryOf        *int64             `db:"retry_of"`
	WorkflowRunID  *int64             `db:"workflow_run_id"`
	WorkflowNode   *string            `db:"workflow_node"`
	OldStatus      *string            `db:"old_status"`
	OldOwner       *string            `db:"old_owner"`
	Req            *string            `db:"req"`
	Ord            *int64             `db:"ord"`
}

// ordinalsOnly reads rows of one column, ord (1 to n), and answers which came
// back, indexed by ord, with no jobs: the caller needs only which positions
// completed. (A map of them was ~0.2 µs a job of the worker's CPU.)
func ordinalsOnly(rows pgx.Rows, n int) ([]bool, error) {
	out := make([]bool, n+1)
	var ord int64
	_, err := pgx.ForEachRow(rows, []any{&ord}, func() error {
		if ord < 1 || ord > int64(n) {
			return fmt.Errorf("answered position %d of %d", ord, n)
		}
		out[ord] = true
		return nil
	})
	return out, err
}

// ordinals maps each returned row's input position (the ord column) to its job.
func ordinals(rows pgx.Rows) (map[int64]*driver.Job, error) {
	out := map[int64]*driver.Job{}
	err := scanJobRows(rows, func(r *jobRow, j *driver.Job) bool {
		if r.Ord != nil {
			out[*r.Ord] = j
		}
		return true
	})
	return out, err
}

func (r *jobRow) job(n *names, s *slab) (*driver.Job, error) {
	for _, c := range []struct {
		name string
		t    pgtype.Timestamptz
	}{{"lease_expires_at", r.LeaseExpiresAt}, {"started_at", r.StartedAt}, {"finished_at", r.FinishedAt}} {
		if err := checkFinite(r.ID, c.name, c.t); err != nil {
			return nil, err
		}
	}
	j := s.job()
	*j = driver.Job{
		ID: r.ID, Kind: n.get(r.Kind), Queue: n.get(r.Queue), Status: lifecycle.Status(n.get(r.Status)),
		Args: s.bytes(r.Args), Priority: int(r.Priority), RunAt: r.RunAt.UTC(),
		Attempt: int(r.Attempt), Executions: int(r.Executions), MaxAttempts: int(r.MaxAttempts),
		Timeout: time.Duration(r.TimeoutMS) * time.Millisecond, LeaseExpiresAt: s.utcOrNil(r.LeaseExpiresAt),
		CreatedAt: r.CreatedAt.UTC(), StartedAt: s.utcOrNil(r.StartedAt), FinishedAt: s.utcOrNil(r.FinishedAt),
		Rev: r.Rev, RetryOf: r.RetryOf, WorkflowRunID: r.WorkflowRunID, Owner: n.get(r.Owner),
	}
	if r.Metadata != nil {
		j.Metadata = s.bytes(r.Metadata)
	}
	if r.Result != nil {
		j.Result = json.RawMessage(r.Result)
	}
	j.IdempotencyKey = deref(r.IdempotencyKey)
	j.Error = deref(r.Error)
	j.WorkflowNode = deref(r.WorkflowNode)
	if r.LeaseToken.Valid {
		j.LeaseToken = formatUUID(r.LeaseToken.Bytes)
	}
	var err error
	if j.Errors, err = driver.DecodeAttemptErrors(r.Errors); err != nil {
		return nil, fmt.Errorf("decode errors of job %d: %w", r.ID, err)
	}
	// PostgreSQL writes a timestamptz into jsonb in the session's TimeZone
	// ("…-05:00"); every other time of a job is read in UTC, as SQLite's are.
	for i := range j.Errors {
		j.Errors[i].At = j.Errors[i].At.UTC()
	}
	return j, nil
}

// jobColumns maps each column a statement may return to its field of jobRow.
var jobColumns = map[string]func(*jobRow) any{
	"id": func(r *jobRow) any { return &r.ID }, "kind": func(r *jobRow) any { return &r.Kind },
	"queue": func(r *jobRow) any { return &r.Queue }, "status": func(r *jobRow) any { return &r.Status },
	"args": func(r *jobRow) any { return &r.Args }, "metadata": func(r *jobRow) any { return &r.Metadata },
	"priority": func(r *jobRow) any { return &r.Priority }, "run_at": func(r *jobRow) any { return &r.RunAt },
	"attempt": func(r *jobRow) any { return &r.Attempt }, "executions": func(r *jobRow) any { return &r.Executions },
	"max_attempts": func(r *jobRow) any { return &r.MaxAttempts }, "timeout_ms": func(r *jobRow) any { return &r.TimeoutMS },
	"idempotency_key": func(r *jobRow) any { return &r.IdempotencyKey }, "owner": func(r *jobRow) any { return &r.Owner },
	"lease_token": func(r *jobRow) any { return &r.LeaseToken }, "lease_expires_at": func(r *jobRow) any { return &r.LeaseExpiresAt },
	"result": func(r *jobRow) any { return &r.Result }, "error": func(r *jobRow) any { return &r.Error },
	"errors": func(r *jobRow) any { return &r.Errors }, "created_at": func(r *jobRow) any { return &r.CreatedAt },
	"started_at": func(r *jobRow) any { return &r.StartedAt }, "finished_at": func(r *jobRow) any { return &r.FinishedAt },
	"rev": func(r *jobRow) any { return &r.Rev }, "retry_of": func(r *jobRow) any { return &r.RetryOf },
	"workflow_run_id": func(r *jobRow) any { return &r.WorkflowRunID }, "workflow_node": func(r *jobRow) any { return &r.WorkflowNode },
	"old_status": func(r *jobRow) any { return &r.OldStatus }, "old_owner": func(r *jobRow) any { return &r.OldOwner },
	"req": func(r *jobRow) any { return &r.Req }, "ord": func(r *jobRow) any { return &r.Ord },
}

// scanJobRows turns each row into a job as it arrives and hands both to fn,
// matching columns by name once per result set (pgx.RowToStructByNameLax matched
// them again for every row, a sixth of the worker's CPU under load). One jobRow
// is reused for every row: a slice of them, grown by append, was a third of a
// busy worker's allocated bytes. The jobs, their times and their args come
// from a slab (see there). Columns jobRow lacks are skipped. fn answers
// whether to read on: false ends the scan there, without an error.
func scanJobRows(rows pgx.Rows, fn func(*jobRow, *driver.Job) bool) error {
	defer rows.Close()
	fds := rows.FieldDescriptions()
	var r jobRow
	var n names
	var s slab
	dest := make([]any, len(fds))
	for i, fd := range fds {
		if f := jobColumns[fd.Name]; f != nil {
			dest[i] = f(&r) // a nil destination skips the column
		}
	}
	for rows.Next() {
		r = jobRow{}
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		j, err := r.job(&n, &s)
		if err != nil {
			return err
		}
		if !fn(&r, j) {
			return nil
		}
	}
	return rows.Err()
}

func collectJobs(rows pgx.Rows) ([]*driver.Job, error) {
	out := []*driver.Job{} // empty, not nil, when there are no rows, as before
	err := scanJobRows(rows, func(_ *jobRow, j *driver.Job) bool { out = append(out, j); return true })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// collectOne returns the single job of rows, or nil when there is none.
func collectOne(rows pgx.Rows) (*driver.Job, error) {
	jobs, err := collectJobs(rows)
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	return jobs[0], nil
}

// formatUUID writes u in the canonical 8-4-4-4-12 form.
func formatUUID(u [16]byte) string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], u[10:16])
	return string(b[:])
}

// slab hands out the jobs of one result, the times they point to and the
// bytes of their args and metadata from chunks of slabJobs jobs (and as many
// bytes as fit slabBytes), so that a claim of 1,000 jobs makes a few dozen
// allocations for them where it made four a job (the job, two times and its
// args; its lease token's text is still its own): in a burn-down the worker's
// process spent a fifth of its CPU allocating and collecting. A result's
// chunks start small and double up to those sizes, so a job read alone
// (JobGet, a fenced call's answer) and kept by its caller is not a claim's
// worth of memory. A chunk lives as long as any job or value of it is
// referenced: a claim's jobs end at about the same time. Each value handed
// out is capped at its length, so an append to a job's args copies them
// instead of writing over the next job's.
type slab struct {
	jobs  []driver.Job
	times []time.Time
	buf   []byte
}

const (
	slabJobs  = 64
	slabBytes = 16 << 10
)

func (s *slab) job() *driver.Job {
	if len(s.jobs) == cap(s.jobs) {
		s.jobs = make([]driver.Job, 0, min(max(2*cap(s.jobs), 1), slabJobs))
	}
	s.jobs = s.jobs[:len(s.jobs)+1]
	return &s.jobs[len(s.jobs)-1]
}

// utcOrNil is t in UTC, or nil for NULL. An infinite t has no time.Time and
// is refused (checkFinite, before), as pgx refused it when these columns were
// scanned into *time.Time; the driver never writes one.
func (s *slab) utcOrNil(t pgtype.Timestamptz) *time.Time {
	if !t.Valid {
		return nil
	}
	if len(s.times) == cap(s.times) {
		s.times = make([]time.Time, 0, min(max(2*cap(s.times), 2), 2*slabJobs))
	}
	s.times = append(s.times, t.Time.UTC())
	return &s.times[len(s.times)-1]
}

// bytes copies b (pgx's buffer, valid until the next row) for keeping; nil
// stays nil (NULL).
func (s *slab) bytes(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	if len(b) > slabBytes/8 {
		return append(json.RawMessage(nil), b...)
	}
	if cap(s.buf)-len(s.buf) < len(b) {
		s.buf = make([]byte, 0, min(max(2*cap(s.buf), 4*len(b), 256), slabBytes))
	}
	at := len(s.buf)
	s.buf = append(s.buf, b...)
	return json.RawMessage(s.buf[at:len(s.buf):len(s.buf)])
}

// checkFinite answers an error for an infinite timestamp of job id's column.
func checkFinite(id int64, column string, t pgtype.Timestamptz) error {
	if t.Valid && t.InfinityModifier != pgtype.Finite {
		return fmt.Errorf("job %d: %s is %s, not a time", id, column, t.InfinityModifier)
	}
	return nil
}

// names interns the short texts that repeat across the rows of one result
// (kind, queue, status, owner: a claim of 1,000 jobs has a handful of each),
// so that each is allocated once per result instead of once per row. It
// keeps at most maxNames; past that a text is allocated as before.
type names map[string]string

const maxNames = 64

// get answers b as a string, "" for NULL. b is pgx's buffer (DriverBytes),
// valid until the next row: a text kept is a copy.
func (n *names) get(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if s, ok := (*n)[string(b)]; ok { // no allocation for the lookup
		return s
	}
	s := string(b)
	if *n == nil {
		*n = make(names, 8)
	}
	if len(*n) < maxNames {
		(*n)[s] = s
	}
	return s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// nowArg is the optional injected time: nil lets the database clock decide.
func nowArg(t *time.Time) any {
	if t == nil {
		return nil
	}
	return *t
}

func micros(d time.Duration) int64 { return d.Microseconds() }

// binArray is an array parameter whose elements pgx encodes through a
// pointer to each: pgx reads an array's elements as values of type any, and a
// plain []int64 or []string had each element boxed, an allocation a job in
// every batch statement. T is a pgtype value type (Int8, Int4, UUID, Text,
// Timestamptz), whose pointer pgx's codecs read without copying it into an
// interface.
type binArray[T any] []T

// Dimensions implements pgtype.ArrayGetter.
func (a binArray[T]) Dimensions() []pgtype.ArrayDimension {
	if a == nil {
		return nil
	}
	return []pgtype.ArrayDimension{{Length: int32(len(a)), LowerBound: 1}}
}

// Index implements pgtype.ArrayGetter.
func (a binArray[T]) Index(i int) any { return &a[i] }

// IndexType implements pgtype.ArrayGetter.
func (a binArray[T]) IndexType() any { return new(T) }

// Value implements driver.Valuer, for pools that send parameters without
// their types (default_query_exec_mode exec or simple_protocol, common behind
// PgBouncer): there pgx finds no plan for binArray and asks for a value,
// which is the array in PostgreSQL's text form, written by pgx's own array
// codec; the statement's cast reads it. With the statement's types known pgx
// never calls it: the array codec takes binArray as an ArrayGetter first.
func (a binArray[T]) Value() (sqldriver.Value, error) {
	if a == nil {
		return nil, nil
	}
	var oid uint32
	switch any(a).(type) {
	case binArray[pgtype.Int8]:
		oid = pgtype.Int8ArrayOID
	case binArray[pgtype.Int4]:
		oid = pgtype.Int4ArrayOID
	case binArray[pgtype.UUID]:
		oid = pgtype.UUIDArrayOID
	case binArray[pgtype.Text]:
		oid = pgtype.TextArrayOID
	case binArray[pgtype.Timestamptz]:
		oid = pgtype.TimestamptzArrayOID
	default:
		return nil, fmt.Errorf("binArray of %T has no array type", *new(T))
	}
	m := textMaps.Get().(*pgtype.Map)
	defer textMaps.Put(m)
	b, err := m.Encode(oid, pgtype.TextFormatCode, a, nil)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// textMaps holds pgx type maps for binArray.Value: a map caches plans and is
// not safe for concurrent use.
var textMaps = sync.Pool{New: func() any { return pgtype.NewMap() }}
