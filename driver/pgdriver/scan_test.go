package pgdriver

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/google/uuid"
)

func TestFormatUUIDMatchesCanonical(t *testing.T) {
	for range 100 {
		u := uuid.New()
		if got, want := formatUUID(u), u.String(); got != want {
			t.Fatalf("formatUUID(%v) = %q, want %q", [16]byte(u), got, want)
		}
	}
}

// TestNamesCopyAndIntern: a text read through names is a copy (pgx reuses the
// buffer for the next row), a repeat is the same string, NULL and empty read
// as "", and past maxNames texts are still answered, only not kept.
func TestNamesCopyAndIntern(t *testing.T) {
	var n names
	buf := []byte("queue-a")
	a := n.get(buf)
	copy(buf, "XXXXXXX")
	if a != "queue-a" {
		t.Fatalf("get = %q after its buffer changed, want a copy", a)
	}
	if b := n.get([]byte("queue-a")); unsafe.StringData(b) != unsafe.StringData(a) {
		t.Errorf("a repeated text was allocated again")
	}
	if n.get(nil) != "" || n.get([]byte{}) != "" {
		t.Errorf("NULL or empty did not read as \"\"")
	}
	for i := range 2 * maxNames {
		s := fmt.Sprintf("kind-%d", i)
		if got := n.get([]byte(s)); got != s {
			t.Fatalf("get(%q) = %q", s, got)
		}
	}
	if len(n) != maxNames {
		t.Errorf("names holds %d texts, want at most %d", len(n), maxNames)
	}
}
