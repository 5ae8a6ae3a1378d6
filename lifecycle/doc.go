// Package lifecycle is the authoritative job state machine of Drover: the status
// set, the allowed transitions and the operation that performs each one, the
// per-status invariants, the attempt and rev rules, and the event vocabulary.
//
// It needs no database. Drivers enforce the same rules inside single guarded SQL
// statements; this package states them once so that the drivers, the worker, the
// conformance suite and the chaos checker all agree, and so that a job's event
// history can be replayed and judged legal or not (CheckHistory).
//
//	           enqueue                       claim (attempt+1)        start (executions+1)
//	(none) ─────────────► queued ───────────────────► claimed ───────────────► running
//	   │                  ▲  ▲ ▲                        │  │                      │ │ │ │
//	   │ enqueue (wf)     │  │ └──── unclaim ───────────┘  │ stall                │ │ │ └─► succeeded (complete)
//	   ▼                  │  │                             ▼                      │ │ └───► failed (fail)
//	pending ─ release ────┘  └──── requeue ──────────── stalled ◄──── stall ──────┘ └─────► queued (retry, snooze)
//	   └─── release ─► skipped                               └── requeue (budget spent) ─► failed
//
// Plus: running → waiting (sleep/approval), waiting → queued (wake), queued/waiting →
// paused → queued (pause/resume), and any non-terminal status → canceled.
//
// Stability: the names of statuses, operations and event types are part of the
// public contract (they appear in the HTTP API and in stored events) and do not change.
package lifecycle
