package blackbox

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/testdb"
)

// TestSecondSignalEndsTheServersShutdownAtOnce: `drover server` shuts down
// gracefully on SIGTERM, waiting up to --shutdown-timeout for the requests in
// flight; a second signal cuts that wait, as it does a worker's (see
// TestSecondSignalCancelsRunningJobsAtOnce): the process says so and exits 0.
// The HTTP server ignored the second signal, and a client that held a request
// open (here one whose body never comes) kept it running for the whole
// --shutdown-timeout, 10 minutes, unless SIGKILLed.
func TestSecondSignalEndsTheServersShutdownAtOnce(t *testing.T) {
	t.Parallel()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			url := migratedURL(t, kind)
			api := make(chan string, 1)
			p := startWatched(t, func(line string) {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "API:" {
					api <- f[1]
				}
			}, "server", "--addr", "127.0.0.1:0", "--database-url", url, "--shutdown-timeout", "10m", "--log-level", "warn")
			var base string
			select {
			case base = <-api:
			case <-p.exited:
				t.Fatal("drover server exited before printing its address")
			case <-time.After(30 * time.Second):
				t.Fatal("drover server did not print its address within 30s")
			}
			host := strings.TrimPrefix(base, "http://")

			// A request in flight: its handler reads a body that never comes.
			// The server's "100 Continue" says the handler is reading it.
			conn, err := net.Dial("tcp", host)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST /jobs HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n", host)
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			status, err := bufio.NewReader(conn).ReadString('\n')
			if err != nil || !strings.HasPrefix(status, "HTTP/1.1 100 ") {
				t.Fatalf("POST /jobs with Expect: 100-continue: got %q (%v), want HTTP/1.1 100 Continue", status, err)
			}

			p.stopTwice(t, "drover server, held by a request in flight,")
			if !strings.Contains(p.out.String(), "a second signal canceled the HTTP requests") {
				t.Errorf("stderr does not say the second signal canceled the requests in flight")
			}
		})
	}
}
