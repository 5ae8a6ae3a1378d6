// Package maintenance runs Drover's engine loops — lease reaper, retention and
// wake-up reconciler — in exactly one process at a time.
//
// Leadership is a lease row in the database (drover_leader). The leader extends it
// every TTL/3 and every other process tries to take it every TTL/10; the database
// clock decides expiry. A leader trusts
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
// The lease expires at most TTL after the old leader dies (its last extension came
// before), and a candidate tries again within TTL/10 of that: a new leader takes
// over at most TTL + TTL/10 after the old one dies.
// Every loop is idempotent and each of its writes is a guarded statement, so even a
// stale leader acting late changes nothing it should not.
package maintenance
