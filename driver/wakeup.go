package driver

import (
	"strconv"
	"strings"
)

// canceledPrefix starts a wake-up that names a canceled job rather than a
// queue. No queue name holds '!' (ValidateName), so a subscriber that matches
// wake-ups against its queues, as every one of an older version does, ignores
// it.
const canceledPrefix = "!canceled:"

// CanceledWakeup is the wake-up a cancel publishes for a job a worker may be
// running (JobCancel, after it commits): a worker that holds the job checks
// its lease at once, and stops the handler, instead of at its next heartbeat.
// Like every wake-up it is only a pointer: a worker that misses it hears of
// the cancel at that heartbeat.
func CanceledWakeup(id int64) string {
	return canceledPrefix + strconv.FormatInt(id, 10)
}

// WakeupCanceled reports the job a CanceledWakeup names, and false for any
// other wake-up (a queue's name, or "" for every queue).
func WakeupCanceled(w string) (id int64, ok bool) {
	s, found := strings.CutPrefix(w, canceledPrefix)
	if !found {
		return 0, false
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, false
	}
	return id, true
}
