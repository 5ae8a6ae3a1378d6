package pgdriver_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/pgdriver"
	"github.com/drover-dev/drover/internal/testdb"
)

// keepaliveSettings answers SHOW of the three keepalive settings on c.
func keepaliveSettings(t *testing.T, c interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) [3]string {
	t.Helper()
	var s [3]string
	if err := c.QueryRow(context.Background(), `SELECT current_setting('tcp_keepalives_idle'),
		current_setting('tcp_keepalives_interval'), current_setting('tcp_keepalives_count')`).Scan(&s[0], &s[1], &s[2]); err != nil {
		t.Fatal(err)
	}
	return s
}

// The sessions of the pool New opens, and the wake-up listener's (a
// connection of the pool's ConnConfig), have TCP keepalives of two minutes
// in all, not the operating system's two hours.
func TestSessionsHaveKeepalives(t *testing.T) {
	t.Parallel()
	d := openUnmigrated(t, testdb.PostgresURL(t))
	want := [3]string{"60", "10", "6"}
	if got := keepaliveSettings(t, d.Pool()); got != want {
		t.Errorf("a pool session's tcp_keepalives_idle, _interval, _count: %v, want %v", got, want)
	}
	ctx := context.Background()
	c, err := pgx.ConnectConfig(ctx, d.Pool().Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if got := keepaliveSettings(t, c); got != want {
		t.Errorf("a listener's session: %v, want %v", got, want)
	}
}

// A keepalive the URL sets (as a parameter, or in options), or the
// database's configuration does, is the one the sessions have.
func TestKeepalivesSetElsewhereWin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := testdb.Connect(ctx, t)
	defer admin.Close(ctx)
	const db = "h43_keepalives"
	_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c := testdb.Connect(ctx, t)
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
	})
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+db+" SET tcp_keepalives_interval = 7"); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(testdb.PostgresBaseURL())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + db
	q := u.Query()
	q.Set("tcp_keepalives_idle", "30")
	q.Set("options", "-c tcp_keepalives_count=3")
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads no + as a space
	d := openUnmigrated(t, u.String())
	if got, want := keepaliveSettings(t, d.Pool()), [3]string{"30", "7", "3"}; got != want {
		t.Errorf("tcp_keepalives_idle, _interval, _count: %v, want %v (the URL's, the database's, the URL's options')", got, want)
	}
}

// A replica whose host is lost in the middle of a claim with a request_id
// (its socket gone without a FIN or a RST, as at a power loss) left its
// session holding the request's advisory lock and, in the claim's
// transaction, the job's row lock. The server's keepalives end that session
// (here after a second): a resend of the claim to another replica, which waits
// for the request's lock, then claims the job. With the operating system's
// keepalives it waited two hours.
func TestLostHostsClaimIsFreedByKeepalives(t *testing.T) {
	pgdriver.SetKeepalives(t, "1", "1", "1")
	ctx := context.Background()
	base := testdb.PostgresURL(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "1") // the claim runs on the session taken here
	u.RawQuery = q.Encode()
	lost := openURL(t, u.String())
	other := openURL(t, base)
	ids, err := other.JobInsertMany(ctx, []driver.InsertParams{{Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 3}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := lost.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sock, ok := c.Conn().PgConn().Conn().(*net.TCPConn)
	pid := c.Conn().PgConn().PID()
	c.Release()
	t.Cleanup(func() { // when the keepalives did not end it
		_, _ = other.Pool().Exec(context.Background(), "SELECT pg_terminate_backend($1)", int64(pid))
	})
	if !ok {
		t.Skip("the test's PostgreSQL is not reached over TCP")
	}
	raw, err := sock.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var vanishErr error
	claim := driver.ClaimParams{Queues: []string{"q"}, Limit: 1, Owner: "lost", RequestID: "req-1",
		Abandoned: func() bool {
			// The claim's answer is acknowledged (an answer still in flight
			// would be sent again, and the retransmission, not a keepalive,
			// would find the socket gone), and then the host is gone: in
			// repair mode a socket closes without a word to its peer
			// (CAP_NET_ADMIN).
			if err := raw.Control(func(fd uintptr) {
				_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
			}); err != nil {
				vanishErr = err
				return true
			}
			if vanishErr = serverAcked(sock); vanishErr != nil {
				return true
			}
			if err := raw.Control(func(fd uintptr) {
				vanishErr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, 19 /* TCP_REPAIR */, 1)
			}); err != nil {
				vanishErr = err
			}
			if vanishErr == nil {
				vanishErr = sock.Close()
			}
			return true
		}}
	jobs, _ := lost.JobClaim(ctx, claim)
	if errors.Is(vanishErr, syscall.EPERM) {
		t.Skip("TCP_REPAIR needs CAP_NET_ADMIN")
	}
	if errors.Is(vanishErr, errNoServerSocket) {
		t.Skip(vanishErr)
	}
	if vanishErr != nil {
		t.Fatal(vanishErr)
	}
	if len(jobs) != 0 {
		t.Fatalf("the lost host's claim answered %d jobs", len(jobs))
	}
	var locks int
	if err := other.Pool().QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())").Scan(&locks); err != nil || locks == 0 {
		t.Fatalf("%d advisory locks held after the host was lost (%v); want the lost session's", locks, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	claim.Owner, claim.Abandoned = "other", nil
	jobs, err = other.JobClaim(cctx, claim)
	if err != nil || len(jobs) != 1 || jobs[0].ID != ids[0].Job.ID {
		t.Fatalf("the resend's claim on another replica after %v: %d jobs, %v; want job %d once the lost session is ended", time.Since(start).Round(time.Millisecond), len(jobs), err, ids[0].Job.ID)
	}
}

var errNoServerSocket = errors.New("the test's PostgreSQL does not listen on this host's IPv4 loopback")

// serverAcked waits until the server's end of c (on this host) has every byte
// it sent acknowledged: its send queue in /proc/net/tcp is empty.
func serverAcked(c *net.TCPConn) error {
	local, remote := c.LocalAddr().(*net.TCPAddr), c.RemoteAddr().(*net.TCPAddr)
	hexAddr := func(a *net.TCPAddr) string {
		ip := a.IP.To4()
		if ip == nil {
			return ""
		}
		return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], a.Port)
	}
	server, client := hexAddr(remote), hexAddr(local)
	if server == "" || !remote.IP.IsLoopback() {
		return errNoServerSocket
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile("/proc/net/tcp")
		if err != nil {
			return err
		}
		found := false
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 5 || f[1] != server || f[2] != client {
				continue
			}
			found = true
			if strings.HasPrefix(f[4], "00000000:") {
				return nil
			}
		}
		if !found {
			return errNoServerSocket
		}
		if time.Now().After(deadline) {
			return errors.New("the server's end never had its answer acknowledged")
		}
		time.Sleep(time.Millisecond) // a kernel queue: no signal to wait for
	}
}
