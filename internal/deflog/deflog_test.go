package deflog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// Warnings and errors reach the default handler current when they are logged,
// with the logger's attributes and groups; info and debug do not.
func TestNewLogsWarningsThroughTheDefault(t *testing.T) {
	old := slog.Default()
	t.Cleanup(func() { slog.SetDefault(old) })

	log := New().With("worker", "w1").WithGroup("g").With("k", 1)
	var buf bytes.Buffer
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	log.Debug("debug line")
	log.Info("info line")
	log.Warn("warn line", "x", 2)
	log.Error("error line")
	out := buf.String()
	for _, no := range []string{"debug line", "info line"} {
		if strings.Contains(out, no) {
			t.Errorf("the default logger logged %q below Warn:\n%s", no, out)
		}
	}
	for _, want := range []string{`level=WARN msg="warn line" worker=w1 g.k=1 g.x=2`, `level=ERROR msg="error line" worker=w1 g.k=1`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// A default that takes errors only.
	buf.Reset()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelError})))
	log.Warn("warn line")
	if buf.Len() != 0 {
		t.Errorf("a default at Error got a warning: %s", buf.String())
	}
}
