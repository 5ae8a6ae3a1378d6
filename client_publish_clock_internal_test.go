package drover

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/sqlitedriver"
	"github.com/drover-dev/drover/lifecycle"
	"github.com/drover-dev/drover/wakeup"
)

// capturingTransport keeps what is published; it delivers nothing.
type capturingTransport struct {
	mu  sync.Mutex
	got []wakeup.Pointer
}

func (c *capturingTransport) Publish(_ context.Context, ps []wakeup.Pointer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, ps...)
	return nil
}

func (c *capturingTransport) Subscribe(ctx context.Context, _ []string) (<-chan wakeup.Message, error) {
	ch := make(chan wakeup.Message)
	go func() { <-ctx.Done(); close(ch) }()
	return ch, nil
}

func (c *capturingTransport) Close() error { return nil }

// Whether a new job is ready now is read on the database's clock (its run_at
// against its created_at), not this process's: with the database's clock two
// seconds ahead, a job enqueued for now was taken for a scheduled one and got
// no wake-up pointer (helper-86). A job scheduled later by the database's
// clock still gets none.
func TestPublishReadsReadinessOnTheDatabasesClock(t *testing.T) {
	d, err := sqlitedriver.Open(filepath.Join(t.TempDir(), "d.db"), sqlitedriver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tr := &capturingTransport{}
	c, err := NewClient(d, &Config{Wakeups: tr})
	if err != nil {
		t.Fatal(err)
	}
	dbNow := time.Now().Add(2 * time.Second) // the database's clock, ahead
	job := func(id int64, runAt time.Time) driver.InsertResult {
		return driver.InsertResult{Job: &driver.Job{ID: id, Queue: "default", Status: lifecycle.StatusQueued, CreatedAt: dbNow, RunAt: runAt}}
	}
	c.publish(context.Background(), []driver.InsertResult{job(1, dbNow), job(2, dbNow.Add(time.Second)), job(3, dbNow.Add(-time.Hour))})
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var ids []int64
	for _, p := range tr.got {
		ids = append(ids, p.JobID)
	}
	if len(ids) != 2 || ids[0] != 1 || ids[1] != 3 {
		t.Errorf("published pointers for jobs %v; want [1 3]: the two ready by the database's clock, not the one due a second after it", ids)
	}
}
