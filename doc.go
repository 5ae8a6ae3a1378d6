// Package drover is a durable job queue and workflow engine for Go, on PostgreSQL
// (production) or embedded SQLite (the default for development).
//
// A Client enqueues jobs, alone, in batches or inside the caller's own database
// transaction. A Worker claims jobs under a time-bounded lease, runs the handler
// registered for their kind with the decoded args, heartbeats, and completes, retries
// (exponential backoff with full jitter) or fails them; every completion is fenced by
// the job's attempt and lease token, so a worker that lost its lease can never
// overwrite a newer result. NewWorker works on the database directly;
// NewRemoteWorker runs the same handlers in a process without database access,
// through a Drover server's worker protocol (package server), which then decides
// retries and backoff. An Engine runs the maintenance loops (lease reaper,
// retention, wake-up reconciler) in exactly one process at a time, elected through a
// lease row in the database.
//
// Guarantees: at-least-once execution; a job is never run by two workers at once while
// both respect their lease; run_at is never claimed early; a job may run more than
// once if a worker dies after a side effect and before completing, so handlers should
// be idempotent. The lifecycle is defined in package lifecycle.
package drover
