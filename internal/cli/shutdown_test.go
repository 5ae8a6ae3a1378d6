package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// --shutdown-timeout 0 means no wait for the HTTP server too: its own zero
// would be its default, 30 s.
func TestHTTPShutdownTimeout(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{0: -1, time.Second: time.Second, time.Nanosecond: time.Nanosecond} {
		if got := httpShutdown(in); got != want {
			t.Errorf("httpShutdown(%s) = %s, want %s", in, got, want)
		}
	}
}

// A server shutdown that ran out of time is the shutdown asked for: said, not
// failed; any other error stays one.
func TestStoppedServing(t *testing.T) {
	var errb bytes.Buffer
	g := &globals{stderr: &errb}
	if err := g.stoppedServing(fmt.Errorf("shutdown: %w", context.DeadlineExceeded), 0); err != nil {
		t.Errorf("a shutdown past its deadline = %v, want nil", err)
	}
	if !strings.Contains(errb.String(), "--shutdown-timeout 0s were canceled") {
		t.Errorf("stderr = %q, want it to say the requests were canceled", errb.String())
	}
	other := errors.New("listen: address in use")
	if err := g.stoppedServing(other, time.Second); err != other {
		t.Errorf("another error = %v, want it returned", err)
	}
}
