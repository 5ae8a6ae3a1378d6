package cli

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/server"
)

// serverFlags configure the HTTP API (server and dev).
type serverFlags struct {
	addr, adminToken, workerToken, tlsCert, tlsKey string
	cmd                                            *cobra.Command // to tell a token given empty from none
}

func (s *serverFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	s.cmd = cmd
	f.StringVar(&s.addr, "addr", envOr("DROVER_ADDR", server.DefaultAddr), "address to listen on (env DROVER_ADDR)")
	f.StringVar(&s.adminToken, "admin-token", os.Getenv("DROVER_ADMIN_TOKEN"), "bearer token for every endpoint (env DROVER_ADMIN_TOKEN)")
	f.StringVar(&s.workerToken, "worker-token", os.Getenv("DROVER_WORKER_TOKEN"), "bearer token for /internal/* only (env DROVER_WORKER_TOKEN)")
	f.StringVar(&s.tlsCert, "tls-cert", os.Getenv("DROVER_TLS_CERT"), "TLS certificate file (env DROVER_TLS_CERT)")
	f.StringVar(&s.tlsKey, "tls-key", os.Getenv("DROVER_TLS_KEY"), "TLS key file (env DROVER_TLS_KEY)")
}

func (s *serverFlags) validate() error {
	if s.addr == "" {
		return driver.Invalid("addr", "must not be empty (e.g. %s)", server.DefaultAddr)
	}
	// A malformed address is refused before the database is opened.
	_, port, err := net.SplitHostPort(s.addr)
	if err != nil {
		return driver.Invalid("addr", "%q is not HOST:PORT (e.g. %s)", s.addr, server.DefaultAddr)
	}
	if _, err := net.LookupPort("tcp", port); err != nil { // a number 0-65535 or a service name
		return driver.Invalid("addr", "%q: port %q is not a port (0 to 65535)", s.addr, port)
	}
	if (s.tlsCert == "") != (s.tlsKey == "") {
		return driver.Invalid("tls", "give both --tls-cert and --tls-key, or neither")
	}
	// --admin-token "$TOKEN" with TOKEN unset turned authentication off
	// without a word, as --server "$URL" is refused for.
	for _, t := range []struct{ flag, env, field, val string }{
		{"admin-token", "DROVER_ADMIN_TOKEN", "admin_token", s.adminToken},
		{"worker-token", "DROVER_WORKER_TOKEN", "worker_token", s.workerToken},
	} {
		env, inEnv := os.LookupEnv(t.env)
		given := s.cmd != nil && s.cmd.Flags().Changed(t.flag)
		if t.val == "" && (given || (inEnv && env == "")) {
			return driver.Invalid(t.field, "is empty (--%s or %s); give a token, or leave both out to serve without one", t.flag, t.env)
		}
		if err := driver.CheckToken(t.field, t.val); err != nil {
			return err
		}
	}
	if s.adminToken != "" && s.adminToken == s.workerToken {
		return driver.Invalid("worker_token", "must differ from the admin token")
	}
	if s.tlsCert != "" {
		// Read now, so a bad file is refused before anything starts.
		if _, err := tls.LoadX509KeyPair(s.tlsCert, s.tlsKey); err != nil {
			return driver.Invalid("tls", "--tls-cert %s / --tls-key %s: %v", s.tlsCert, s.tlsKey, err)
		}
	}
	return nil
}

func newServerCmd(g *globals) *cobra.Command {
	n := &nodeFlags{}
	sf := &serverFlags{}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Serve the HTTP API and the worker protocol (and campaign to run the engine)",
		Long: "Serves the JSON API for jobs, the DLQ and queues, and the worker protocol under /internal/\n" +
			"that lets `drover worker --server URL` run jobs without database access.",
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.runNode(cmd.Context(), nodeOpts{flags: n, server: sf,
				ready: func(c *drover.Client, _ *drover.Worker, addr string) error {
					auth := "off (set --admin-token / --worker-token to require bearer tokens)"
					if sf.adminToken != "" || sf.workerToken != "" {
						auth = "bearer tokens"
					}
					fmt.Fprintf(g.stderr, "Drover server\n  API:      %s\n  database: %s\n  auth:     %s\n", addr, describeURL(g.databaseURL), auth)
					return nil
				}})
		},
	}
	n.register(cmd, false)
	sf.register(cmd)
	return cmd
}
