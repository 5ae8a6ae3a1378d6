package pgdriver

import (
	"testing"

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
