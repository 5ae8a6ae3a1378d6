package pgdriver

import "testing"

// SetKeepalives sets the TCP keepalives New gives its sessions until t ends.
// Not for parallel tests.
func SetKeepalives(t testing.TB, idle, interval, count string) {
	prev := keepalives
	keepalives = [][2]string{{"tcp_keepalives_idle", idle}, {"tcp_keepalives_interval", interval}, {"tcp_keepalives_count", count}}
	t.Cleanup(func() { keepalives = prev })
}
