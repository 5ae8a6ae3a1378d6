package chaos

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain makes the test binary its own child process: the harness re-executes
// it with EnvChild set.
func TestMain(m *testing.M) {
	if os.Getenv(EnvChild) != "" {
		os.Exit(RunChild(os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestChaosShort runs the short profile end to end on its own PostgreSQL, then
// the SQLite profile, and fails on any non-zero check. It takes about a minute,
// so it runs only with DROVER_CHAOS=1 (CI's chaos step sets it).
func TestChaosShort(t *testing.T) {
	if os.Getenv("DROVER_CHAOS") == "" {
		t.Skip("set DROVER_CHAOS=1 to run the end-to-end chaos profile (about a minute)")
	}
	if _, err := findPostgresBin(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	for _, drv := range []string{"postgres", "sqlite"} {
		t.Run(drv, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			sum, err := Run(ctx, Config{Short: true, Driver: drv, Exec: []string{os.Args[0]}, Progress: testLog{t: t}})
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			t.Log(sum.String())
			if f := sum.Failures(); len(f) > 0 {
				t.Errorf("checks failed: %s\n%s", strings.Join(f, "; "), strings.Join(sum.Problems, "\n"))
			}
		})
	}
}

// testLog writes progress lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
