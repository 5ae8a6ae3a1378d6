package drover_test

import (
	"context"
	"testing"

	"github.com/drover-dev/drover"
)

// A status no job has is refused, naming it, as the HTTP API refuses it: the
// library listed nothing, which read as "no such jobs" (a caller asking for
// River's "discarded", or "Failed", saw an empty dead-letter queue).
func TestListRefusesAnUnknownStatus(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ctx := context.Background()
		enqueue(t, c, "k", nil, nil)
		for _, s := range []drover.JobStatus{"discarded", "Queued", ""} {
			jobs, err := c.List(ctx, drover.ListParams{Statuses: []drover.JobStatus{drover.StatusFailed, s}})
			if err == nil {
				t.Errorf("List with status %q: %d jobs and no error, want an invalid status", s, len(jobs))
				continue
			}
			wantInvalid(t, err, "status")
		}
		jobs, err := c.List(ctx, drover.ListParams{Statuses: []drover.JobStatus{drover.StatusQueued}})
		if err != nil || len(jobs) != 1 {
			t.Errorf("List of queued jobs: %d jobs, %v; want the one", len(jobs), err)
		}
	})
}
