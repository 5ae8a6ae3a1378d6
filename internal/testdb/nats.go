package testdb

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultNATSURL is used when DROVER_TEST_NATS_URL is unset.
const DefaultNATSURL = "nats://127.0.0.1:4222"

// NATSURL returns a NATS server with JetStream for tests. If none answers the test
// is skipped, except under CI=true, where it fails (as PostgresURL does).
func NATSURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("DROVER_TEST_NATS_URL")
	if url == "" {
		url = DefaultNATSURL
	}
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err == nil {
		defer nc.Close()
		var js jetstream.JetStream
		if js, err = jetstream.New(nc); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err = js.AccountInfo(ctx)
		}
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("NATS JetStream unreachable at %s (CI=true, so this fails instead of skipping): %v", url, err)
		}
		t.Skipf("NATS JetStream unreachable at %s: %v", url, err)
	}
	return url
}
