package drover_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/internal/testdb"
	"github.com/drover-dev/drover/wakeup"
)

// refusingTransport refuses every publish.
type refusingTransport struct{}

func (refusingTransport) Publish(context.Context, []wakeup.Pointer) error {
	return errors.New("transport down")
}

func (refusingTransport) Subscribe(context.Context, []string) (<-chan wakeup.Message, error) {
	return nil, errors.New("transport down")
}

func (refusingTransport) Close() error { return nil }

// With no Logger, a client's warnings go through slog.Default(), as River's
// go to its default logger: they were discarded, and a program that set no
// logger never heard that its wake-ups (or its worker's claims) failed. Info
// stays quiet. Not parallel: it sets the process's default logger.
func TestClientWithoutLoggerWarnsThroughTheDefault(t *testing.T) {
	var buf logBuffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old) })

	c, err := drover.NewClient(testdb.Open(t, "sqlite"), &drover.Config{Wakeups: refusingTransport{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(context.Background(), "email", map[string]int{"n": 1}, nil); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, `level=WARN msg="publishing wake-ups failed; workers will find the jobs by polling" err="transport down"`) {
		t.Errorf("the default logger got no warning for the failed wake-up; it got:\n%s", out)
	}
	if out := buf.String(); strings.Contains(out, "level=INFO") || strings.Contains(out, "level=DEBUG") {
		t.Errorf("the default logger got records below Warn:\n%s", out)
	}
}
