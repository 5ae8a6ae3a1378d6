package drover

import (
	"testing"

	"github.com/google/uuid"
)

// TestNewRequestID: every report's request_id is a version 4 UUID in the usual
// form, and none repeats (a repeat on one job would make a new report look like
// a retry of an earlier one).
func TestNewRequestID(t *testing.T) {
	seen := make(map[string]bool, 100000)
	for range 100000 {
		id := newRequestID()
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 4 || u.Variant() != uuid.RFC4122 || u.String() != id {
			t.Fatalf("%q: not a version 4 UUID (%v, version %d, variant %v)", id, err, u.Version(), u.Variant())
		}
		if seen[id] {
			t.Fatalf("%q came twice", id)
		}
		seen[id] = true
	}
}
