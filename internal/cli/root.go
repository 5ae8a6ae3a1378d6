// Package cli implements the drover command with cobra. Each file holds one
// command group; output goes through printer so every command speaks tables to
// people and, with -o json, the same job objects the HTTP API returns.
package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
)

// DefaultDatabaseURL is the embedded SQLite file used when nothing else is set.
const DefaultDatabaseURL = "./drover.db"

type globals struct {
	server      string // operator commands talk to this server instead of the database
	token       string
	cacert      string         // --cacert: a PEM file of the CAs --server's certificate must chain to
	roots       *x509.CertPool // read from cacert by pickServer; nil: the system's
	databaseURL string
	output      string
	logLevel    string
	stdin       *os.File // read only to confirm a command on a terminal
	stdout      io.Writer
	stderr      io.Writer
	// hurry ends at a second SIGINT or SIGTERM: a shutdown under way stops
	// waiting for the running jobs and cancels them (see mainWith).
	hurry context.Context
}

// Main runs the command line and returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	return mainWith(args, os.Stdin, stdout, stderr)
}

// mainWith is Main reading stdin from stdin.
func mainWith(args []string, stdin *os.File, stdout, stderr io.Writer) int {
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRoot(g)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	// The first signal ends ctx: the command stops gracefully. A second
	// ends g.hurry: the shutdown stops waiting for the running jobs, as
	// most tools do. It was ignored until --shutdown-timeout ran out, and an
	// operator who wanted out had only SIGKILL, which leaves the running
	// jobs to wait out their lease before they run again.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	hurry, hurryNow := context.WithCancel(context.Background())
	defer hurryNow()
	g.hurry = hurry
	done := make(chan struct{})
	defer close(done)
	go func() {
		for _, end := range []context.CancelFunc{stop, hurryNow} {
			select {
			case <-sigs:
				end()
			case <-done:
				return
			}
		}
	}()
	if cmd, err := root.ExecuteContextC(ctx); err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			// A signal came before the command was done: while it started
			// (connecting, migrating), for a command that runs until
			// stopped, which is the stop asked for; for any other, the work
			// was cut short. It said "error: context canceled" and exited 1,
			// as for a failure.
			if cmd != nil && runsUntilStopped[cmd.Name()] && cmd.Parent() == root {
				fmt.Fprintf(stderr, "stopped: a signal came before %s had started (%v)\n", cmd.CommandPath(), err)
				return 0
			}
			fmt.Fprintf(stderr, "error: interrupted by a signal: %v\n", err)
			return exitInterrupted
		}
		if strings.HasPrefix(err.Error(), "unknown command ") { // cobra's, of the root
			// The hint goes on the first line, before cobra's "Did you mean".
			first, rest, _ := strings.Cut(err.Error(), "\n")
			fmt.Fprintf(stderr, "error: %s (see drover --help)\n", first)
			if rest = strings.TrimSpace(rest); rest != "" {
				fmt.Fprintln(stderr, rest)
			}
			return 2
		}
		if isUserError(err) {
			if hint := envHint(cmd, err); hint != "" {
				fmt.Fprintf(stderr, "error: %v (%s)\n", err, hint)
			} else {
				fmt.Fprintln(stderr, "error:", err)
			}
			return 2
		}
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}

var errUsage = errors.New("usage")

// numberFlagError is pflag's error for a number flag's value that does not
// parse, which quotes Go's strconv text.
var numberFlagError = regexp.MustCompile(`^invalid argument (".*") for "(.+)" flag: strconv\.Parse\w+: parsing ".*": (invalid syntax|value out of range)$`)

// flagError words a flag's parse error as every other bad value is worded:
// the flag, the value and the reason, without strconv's text ("strconv.ParseInt:
// parsing \"abc\": invalid syntax").
func flagError(err error) error {
	m := numberFlagError.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	reason := "is not a whole number"
	if m[3] == "value out of range" {
		reason = "is out of range"
	}
	return fmt.Errorf("invalid %s: %s %s", strings.TrimLeft(m[2], "-"), m[1], reason)
}

// envOfFlag finds the variable a flag's help names, "(env DROVER_X)".
var envOfFlag = regexp.MustCompile(`\(env (DROVER_[A-Z_]+)\)`)

// envHint says which environment variable gave the value err refuses, when
// it came from one rather than the command line: "invalid database_url: …"
// pointed at a --database-url the user never typed. The value is not shown
// (it may be a secret). "" when no flag of cmd's took its value so.
func envHint(cmd *cobra.Command, err error) string {
	if cmd == nil {
		return ""
	}
	var ve *driver.ValidationError
	field := ""
	if errors.As(err, &ve) {
		field = ve.Field
	}
	hint := ""
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		m := envOfFlag.FindStringSubmatch(f.Usage)
		if hint != "" || m == nil || f.Changed || os.Getenv(m[1]) == "" {
			return
		}
		if field == strings.ReplaceAll(f.Name, "-", "_") || strings.Contains(err.Error(), "--"+f.Name+" ") {
			hint = "from " + m[1] + " in the environment"
		}
	})
	return hint
}

// runsUntilStopped are the commands that run until a signal stops them.
var runsUntilStopped = map[string]bool{"dev": true, "server": true, "worker": true}

// exitInterrupted is the exit status of a command a signal cut short, as a
// shell reports one that SIGINT ended (128 + 2).
const exitInterrupted = 130

func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "drover",
		Short:         "Drover: a durable job queue on PostgreSQL or embedded SQLite",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if g.output != "table" && g.output != "json" {
				return fmt.Errorf("%w: -o must be table or json, got %q", errUsage, g.output)
			}
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
				return fmt.Errorf("%w: --log-level must be debug, info, warn or error, got %q", errUsage, g.logLevel)
			}
			return g.pickServer(cmd)
		},
	}
	// A mistyped flag or value is bad input: exit 2, like every other.
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w: %v (see %s --help)", errUsage, flagError(err), cmd.CommandPath())
	})
	defURL := os.Getenv("DROVER_DATABASE_URL")
	if defURL == "" {
		defURL = DefaultDatabaseURL
	}
	root.PersistentFlags().StringVar(&g.databaseURL, "database-url", defURL,
		"postgres:// URL or SQLite file path (env DROVER_DATABASE_URL)")
	root.PersistentFlags().StringVar(&g.server, "server", os.Getenv("DROVER_SERVER"),
		"jobs and dlq commands talk to this drover server (http://host:port) instead of the database (env DROVER_SERVER)")
	root.PersistentFlags().StringVar(&g.token, "token", os.Getenv("DROVER_TOKEN"), "bearer token for --server (env DROVER_TOKEN)")
	root.PersistentFlags().StringVar(&g.cacert, "cacert", os.Getenv("DROVER_CACERT"),
		"PEM file of the CA certificates an https --server's certificate must chain to, instead of the system's (env DROVER_CACERT)")
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "table", "output format: table or json")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", envOr("DROVER_LOG_LEVEL", "info"), "debug, info, warn or error (env DROVER_LOG_LEVEL)")
	root.AddCommand(newMigrateCmd(g), newDevCmd(g), newServerCmd(g), newWorkerCmd(g), newJobsCmd(g), newDLQCmd(g), newBenchCmd(g), newChaosCmd(g), newChaosWorkerCmd(g))
	hideSecretDefaults(root)
	return root
}

// secretDefaults are the flags whose default, read from the environment, may
// be a secret (a token, a URL with its password), and the default their help
// shows instead: --help printed the variable's value.
var secretDefaults = map[string]string{
	"database-url": DefaultDatabaseURL, "token": "", "admin-token": "", "worker-token": "", "nats-url": "",
}

// hideSecretDefaults makes the help of cmd and its subcommands show
// secretDefaults: a flag's DefValue is only what its help prints, its value
// (from the environment) is kept.
func hideSecretDefaults(cmd *cobra.Command) {
	for name, def := range secretDefaults {
		if f := cmd.Flags().Lookup(name); f != nil {
			f.DefValue = def
		}
		if f := cmd.PersistentFlags().Lookup(name); f != nil {
			f.DefValue = def
		}
	}
	for _, c := range cmd.Commands() {
		hideSecretDefaults(c)
	}
}

// group makes cmd, a command that only holds subcommands, print its help when
// run alone and refuse anything else as an unknown subcommand (cobra would print
// the help and exit 0).
func group(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("%w: unknown command %q for %q (see %s --help)", errUsage, args[0], cmd.CommandPath(), cmd.CommandPath())
		}
		return cmd.Help()
	}
	return cmd
}

// pickServer settles whether cmd works through a server or on a database, so
// that neither setting is silently ignored: only jobs, dlq and worker work
// through a server, and an explicit --database-url beside an explicit --server
// is refused. Given on the command line, --database-url beats DROVER_SERVER
// from the environment, as a flag beats a variable.
func (g *globals) pickServer(cmd *cobra.Command) error {
	top := cmd
	for top.HasParent() && top.Parent().HasParent() {
		top = top.Parent()
	}
	switch top.Name() {
	case "jobs", "dlq", "worker":
	default:
		return notThroughServer(cmd)
	}
	if cmd.Flags().Changed("server") && g.server == "" {
		// --server "$URL" with URL unset must not fall back to the database
		// (a ./drover.db it would create here), as --database-url "" does not.
		return driver.Invalid("server", "is empty; give the server's URL (e.g. http://127.0.0.1:7420), or leave --server out to work on the database")
	}
	if err := driver.CheckToken("token", g.token); err != nil && (g.server != "" || cmd.Flags().Changed("token")) {
		return err
	}
	if cmd.Flags().Changed("token") && !cmd.Flags().Changed("server") && (g.server == "" || cmd.Flags().Changed("database-url")) {
		// A token says a server was meant: without one the command would
		// work on the database (a ./drover.db it would create here).
		return driver.Invalid("token", "is for --server, which is not given: %s would work on the database (--database-url)", cmd.CommandPath())
	}
	if cmd.Flags().Changed("database-url") {
		if cmd.Flags().Changed("server") {
			return driver.Invalid("server", "%s and --database-url are both given: %s works through one of them", g.server, cmd.CommandPath())
		}
		g.server = "" // DROVER_SERVER, overridden by the flag
	}
	return g.readCACert(cmd)
}

// readCACert reads --cacert into g.roots, refusing a file with no
// certificate in it, and a flag that would not be used (no --server, or one
// without TLS); DROVER_CACERT alone is then left unused, as DROVER_TOKEN is.
func (g *globals) readCACert(cmd *cobra.Command) error {
	given := cmd.Flags().Changed("cacert")
	https := strings.HasPrefix(strings.ToLower(strings.TrimSpace(g.server)), "https://")
	switch {
	case g.cacert == "" && given:
		return driver.Invalid("cacert", "is empty; give a PEM file of CA certificates, or leave --cacert out to trust the system's")
	case g.cacert == "", !given && !https:
		return nil
	}
	switch {
	case g.server == "":
		return driver.Invalid("cacert", "is for an https --server, which is not given: %s works on the database", cmd.CommandPath())
	case !https:
		return driver.Invalid("cacert", "is for an https --server; %s is not one (a CA applies to TLS only)", strings.TrimSpace(g.server))
	}
	pem, err := os.ReadFile(g.cacert)
	if err != nil {
		return driver.Invalid("cacert", "%v", err)
	}
	g.roots = x509.NewCertPool()
	if !g.roots.AppendCertsFromPEM(pem) {
		return driver.Invalid("cacert", "%s holds no PEM certificate", g.cacert)
	}
	return nil
}

// httpTransport is the transport of the requests to --server: Go's default,
// trusting only --cacert's CAs when it is given.
func (g *globals) httpTransport() http.RoundTripper {
	if g.roots == nil {
		return http.DefaultTransport
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: g.roots, MinVersion: tls.VersionTLS12}
	return t
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func (g *globals) logger() *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
		lvl = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: lvl}))
}

// open connects to the database. The embedded SQLite file is migrated
// automatically, and so is PostgreSQL when migrate is set (dev, bench); otherwise a
// PostgreSQL schema that is behind is an error that says how to fix it, since
// production schema changes should be deliberate. A schema ahead of this build
// (migrated by a newer drover) is refused on both drivers.
func (g *globals) open(ctx context.Context, migrate bool) (*drover.Client, driver.Driver, error) {
	drv, err := drover.Open(ctx, g.databaseURL, g.logger())
	if err != nil {
		return nil, nil, err
	}
	if err := drv.Ping(ctx); err != nil {
		_ = drv.Close()
		return nil, nil, fmt.Errorf("database %s unreachable: %w", describeURL(g.databaseURL), err)
	}
	if migrate || drv.Name() == "sqlite" {
		if err := drv.MigrateUp(ctx); err != nil {
			_ = drv.Close()
			return nil, nil, err
		}
	} else if st, err := drv.MigrateStatus(ctx); err != nil {
		_ = drv.Close()
		return nil, nil, err
	} else if err := st.CheckNotAhead(); err != nil {
		_ = drv.Close()
		return nil, nil, err
	} else if want := st.Latest(); st.Dirty {
		_ = drv.Close()
		return nil, nil, fmt.Errorf("database schema is at version %d, marked dirty: a migration to it failed part way; this drover needs %d: see `drover migrate status`", st.Current, want)
	} else if st.Current < want {
		_ = drv.Close()
		return nil, nil, fmt.Errorf("database schema is at version %d, this drover needs %d: run `drover migrate up`", st.Current, want)
	}
	c, err := drover.NewClient(drv, &drover.Config{Logger: g.logger()})
	if err != nil {
		_ = drv.Close()
		return nil, nil, err
	}
	return c, drv, nil
}

// withClient gives fn the server's API when --server is set, else the database's,
// opened for this one command and closed after fn.
func (g *globals) withClient(ctx context.Context, fn func(c api) error) error {
	if g.server != "" {
		r, err := newRemoteAPI(g.server, g.token, g.httpTransport())
		if err != nil {
			return err
		}
		return fn(r)
	}
	c, drv, err := g.open(ctx, false)
	if err != nil {
		return err
	}
	defer drv.Close()
	return fn(localAPI{c})
}

// done prints v as JSON with -o json, else the message for people.
func (g *globals) done(v any, format string, a ...any) error {
	if g.output == "json" {
		return g.json(v)
	}
	fmt.Fprintf(g.stdout, format+"\n", a...)
	return nil
}

// nothingNew is done for a call that changed nothing (an idempotent repeat):
// with -o json the message goes to stderr, so that a script reading the job
// on stdout is still told that it is an earlier one.
func (g *globals) nothingNew(v any, format string, a ...any) error {
	if g.output == "json" {
		fmt.Fprintf(g.stderr, format+"\n", a...)
	}
	return g.done(v, format, a...)
}

// describeURL shows where data lives without echoing a password: neither the
// user info's nor a password= parameter's, which pgx takes too.
func describeURL(u string) string {
	if strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://") {
		rest, query, hasQuery := strings.Cut(u, "?")
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			scheme, _, _ := strings.Cut(rest, "://")
			rest = scheme + "://…@" + rest[at+1:]
		}
		if !hasQuery {
			return rest
		}
		params := strings.Split(query, "&")
		for i, p := range params {
			if key, _, _ := strings.Cut(p, "="); strings.EqualFold(unescape(key), "password") {
				params[i] = key + "=xxxxx"
			}
		}
		return rest + "?" + strings.Join(params, "&")
	}
	return "sqlite:" + u
}

// unescape is a query key as url.ParseQuery reads it (pa%73sword is password).
func unescape(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}
