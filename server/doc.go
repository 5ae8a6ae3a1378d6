// Package server is Drover's HTTP API: JSON endpoints for jobs, the dead-letter
// queue and queues; the worker protocol (/internal/task-claim, /internal/heartbeat,
// /internal/task-complete, and /internal/task-cancels, a long poll that names the
// jobs canceled) that lets workers run anywhere without database access;
// health, Prometheus metrics and the OpenAPI document.
//
// The server is the dispatcher of seed 000: workers only claim, execute, heartbeat
// and report; the server fences every report by (task_id, attempt, lease_token),
// decides retries and backoff, and answers a repeated request_id with the first
// answer. A task-claim claims and starts its jobs in the same call, so a remote
// worker never holds a claimed-but-not-started job.
//
// Every error is {"error": {"code", "message"}} with a fitting status: 400 bad input
// (naming the field), 401/403 auth, 404, 405, 409 lost lease or a request_id
// another call used (code conflict, naming request_id), 413 too large, 422
// invalid transition; 500 only for faults of the server itself, never with a stack.
//
// Stability: the paths and fields are the public contract of the HTTP API; the Go
// API of this package may change until 1.0.
package server
