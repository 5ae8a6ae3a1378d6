// Package wakeup carries wake-ups: pointers that say a job, or some job of a queue,
// may be claimable. A pointer is never the job: the job row in the database is the
// truth, so a pointer that is lost, duplicated, late or stale never loses or doubles
// work. A lost one only delays a job until a worker's fallback poll or the leader's
// wake-up reconciler finds it; a duplicate only costs a claim that finds nothing.
//
// One interface, Transport, has two implementations:
//
//   - FromDriver wraps the database driver's own wake-ups (in-process for SQLite,
//     LISTEN/NOTIFY for PostgreSQL). They are queue-level (JobID 0), best effort,
//     and need nothing but the database.
//   - NewNATS uses a NATS JetStream stream: one message per ready job, at-least-once,
//     shared by all workers of a queue through one durable pull consumer, and
//     redelivered when a receiver does not ack it within AckWait.
//
// A receiver's contract, whatever the transport:
//
//	receive Message m (only when it has a free slot to run the job)
//	claim:  m.JobID != 0 → JobClaim{ID: m.JobID}; else JobClaim{Queues: {m.Queue}}
//	ack:    m.Ack() once the claim has answered, whether or not it got a job
//	        (leave it unacked on a database error: it comes back after AckWait)
//
// and it keeps polling as well, because no transport promises delivery.
//
// Stability: this package is a deliberate public seam so that an operator can plug
// in another transport. Pointer, Message and Transport may change between minor
// versions until 1.0; the NATS subject layout and stream settings are part of the
// deployment contract and change only with a note in the release notes.
package wakeup
