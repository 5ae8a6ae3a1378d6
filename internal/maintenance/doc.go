// Package maintenance runs Drover's engine loops — lease reaper, retention and
// wake-up reconciler — in exactly one process at a time.
//
// Leadership is a lease row in the database (drover_leader). Every process tries to
// take or extend it every TTL/3; the database clock decides expiry. A leader trusts
// itself until TTL − TTL/10 after the moment it *asked* for its last successful
// extension; every loop checks that deadline before each pass, so a leader that
// cannot extend (database unreachable, process paused) stops acting before the
// lease it last confirmed can expire and a successor be elected. Two leaders never
// act in the same window as long as clocks tick at about the same rate:
//
//	leader A:  elect ──extend──extend──✗ (crash)
//	lease:     |────────TTL────────|
//	leader B:        try    try    try──elect (lease expired) ── loops start
//
// A new leader therefore takes over at most TTL + TTL/3 after the old one dies.
// Every loop is idempotent and each of its writes is a guarded statement, so even a
// stale leader acting late changes nothing it should not.
package maintenance
