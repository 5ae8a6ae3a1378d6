package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
)

// stepRecorder records where each step of a real driver's repair walk began.
// With fail set, its next step fails as a lost connection would.
type stepRecorder struct {
	driver.Repairer
	afters []int64
	fail   bool
}

func (s *stepRecorder) RepairStep(ctx context.Context, after int64, limit int) (int64, int, error) {
	s.afters = append(s.afters, after)
	if s.fail {
		s.fail = false
		return after, 0, errors.New("connection lost")
	}
	return s.Repairer.RepairStep(ctx, after, limit)
}

// A repair walk that reaches the end of the table starts again only once rest
// has passed since it began; one that took longer than rest goes straight on. A
// step that fails is tried again at the next call, and a walk whose first step
// failed has not begun.
// Before, a table smaller than a step was read whole every reconcile period.
func TestRepairWalkRestsBetweenWalks(t *testing.T) {
	t.Parallel()
	drv := testdb.Open(t, "postgres")
	ctx := context.Background()
	params := make([]driver.InsertParams, 5)
	for i := range params {
		params[i] = driver.InsertParams{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 1}
	}
	res, err := drv.JobInsertMany(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	id := func(i int) int64 { return res[i].Job.ID }
	rec := &stepRecorder{Repairer: drv.(driver.Repairer), fail: true}
	w := &repairWalk{r: rec, log: slog.New(slog.DiscardHandler), size: 2, rest: time.Minute}
	t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		at    time.Duration
		ran   bool
		after int64 // where the step began, if it ran
	}{
		{-time.Second, true, 0},        // fails, and begins nothing
		{0, true, 0},                   // a walk begins: jobs 0 and 1
		{time.Second, true, id(1)},     // jobs 2 and 3
		{2 * time.Second, true, id(3)}, // job 4, the end
		{3 * time.Second, false, 0},    // rests
		{59 * time.Second, false, 0},   // still
		{time.Minute, true, 0},         // a minute after the walk began
		{time.Minute + time.Second, true, id(1)},
		{time.Minute + 2*time.Second, true, id(3)},
		{2*time.Minute + time.Second, true, 0}, // no rest: a minute has passed
	} {
		n := len(rec.afters)
		if ran := w.step(ctx, t0.Add(c.at)); ran != c.ran {
			t.Fatalf("at %s: ran %v, want %v", c.at, ran, c.ran)
		}
		if !c.ran {
			if len(rec.afters) != n {
				t.Fatalf("at %s: a step ran while resting", c.at)
			}
			continue
		}
		if len(rec.afters) != n+1 || rec.afters[n] != c.after {
			t.Fatalf("at %s: steps began after %v, want a step after %d", c.at, rec.afters[n:], c.after)
		}
	}
}
