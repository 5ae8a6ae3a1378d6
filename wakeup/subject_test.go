package wakeup

import (
	"strings"
	"testing"
)

func TestQueueToken(t *testing.T) {
	for _, tc := range []struct{ queue, want string }{
		{"default", "default"},
		{"emails:high-prio", "emails:high-prio"},
		{"a.b", "a_2Eb"},
		{"a_b", "a_5Fb"},
		{"a_2Eb", "a_5F2Eb"}, // the escape itself is escaped, so this differs from "a.b"
		{"...", "_2E_2E_2E"},
	} {
		if got := queueToken(tc.queue); got != tc.want {
			t.Errorf("queueToken(%q) = %q, want %q", tc.queue, got, tc.want)
		}
	}
}

func TestConsumerNameIsBoundedAndDistinct(t *testing.T) {
	long1 := strings.Repeat(".", 128)
	long2 := strings.Repeat(".", 127) + "_"
	n1, n2 := consumerName(long1), consumerName(long2)
	if len(n1) > maxConsumerName || len(n2) > maxConsumerName {
		t.Fatalf("consumer names of %d and %d bytes, want at most %d", len(n1), len(n2), maxConsumerName)
	}
	if n1 == n2 {
		t.Fatalf("queues %q and %q share consumer %q", long1, long2, n1)
	}
	if strings.ContainsAny(n1, ".*> ") {
		t.Fatalf("consumer name %q has a character NATS forbids", n1)
	}
}
