package drover

import (
	"testing"
	"time"
)

// The cancels kept for jobs not running here are bounded: past the bound the
// expired ones go first, then the oldest, and the newest is always kept.
func TestUnseenCancelsAreBounded(t *testing.T) {
	var r runningJobs
	t0 := time.Now()
	r.keepUnseen(1, t0.Add(-unseenCancelFor)) // expired
	for id := int64(2); id <= unseenCancelsMax; id++ {
		r.keepUnseen(id, t0.Add(time.Duration(id)*time.Millisecond))
	}
	if len(r.unseen) != unseenCancelsMax {
		t.Fatalf("%d kept, want %d", len(r.unseen), unseenCancelsMax)
	}
	now := t0.Add(time.Minute)
	r.keepUnseen(100000, now) // the expired one goes
	if _, ok := r.unseen[1]; ok || len(r.unseen) != unseenCancelsMax {
		t.Errorf("at the bound, the expired cancel kept: %v, %d kept", ok, len(r.unseen))
	}
	r.keepUnseen(100001, now) // none expired: the oldest (2) goes
	if _, ok := r.unseen[2]; ok || len(r.unseen) != unseenCancelsMax {
		t.Errorf("at the bound, the oldest cancel kept: %v, %d kept", ok, len(r.unseen))
	}
	if _, ok := r.unseen[100001]; !ok {
		t.Error("the newest cancel was not kept")
	}
}
