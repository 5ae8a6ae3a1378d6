// Package sqlitedriver is the embedded SQLite implementation of driver.Driver,
// on the pure-Go modernc.org/sqlite, so one binary runs Drover with no server.
//
// Concurrency model. SQLite has one writer per database file. The driver keeps
// one write connection (a pool of size one) and a small pool of query_only
// readers; WAL mode lets the readers run beside the writer. Every write
// transaction begins IMMEDIATE, taking the file's write lock at BEGIN, so a
// transaction that reads and then writes (claim: select candidates, then update
// them) can neither interleave with another writer nor fail half-way with
// SQLITE_BUSY on a lock upgrade. Other processes on the same file wait for that
// lock for up to busy_timeout (10 s). This is why claims need no SKIP LOCKED:
// the write lock serialises claimers across goroutines and processes.
//
// Each transition reads the job, checks its request_id, and runs one guarded
// UPDATE … RETURNING * whose WHERE clause is the fence (status, attempt,
// lease_token); it then appends the event whose seq is the new rev. All of it
// happens in one transaction under the write lock.
//
// Batches are set-based, so a job costs a share of a few statements rather than
// statements of its own: the batch travels as bound parameters, a VALUES row
// per job, in chunks of a few fixed sizes (rows.go) so each shape is prepared
// once. JobInsertMany is one INSERT … SELECT per chunk (a job's enqueued
// event is its row: enqueued_by); JobClaim is one candidate SELECT per queue,
// one UPDATE … FROM and one event INSERT per chunk (with Start, the row goes
// straight to running and claimed and started are logged as one event row, as
// in pgdriver; a worker's claim, with Start and no request_id, keeps them in
// the row instead, claim_seq, and inserts none: migration 009; a statement
// that ends the claim otherwise writes them out, keptClaim, and the check of
// migration 010 refuses any other update that would drop them). JobCompleteMany and JobStartMany first insert the events of
// every job whose fence holds and whose request_id is new, then UPDATE exactly
// the jobs that got one; a completion without a request_id keeps its event in
// the row (finished_by) and only the UPDATE's fence decides it. The rest (a
// lost lease, an unknown id, a replay, a job named again) take the
// one-at-a-time path, which diagnoses them.
//
// Durability: synchronous=FULL, so a committed job survives a power loss.
// Times are stored as INTEGER unix microseconds, UTC; "now" is the process clock
// unless a params struct carries Now.
//
// Wake-ups are in-process only: workers in other processes find work by polling.
//
// Stability: the exported API (Open, Options, Driver.DB) follows the driver
// package's stability promise; the SQL and schema are internal.
package sqlitedriver
