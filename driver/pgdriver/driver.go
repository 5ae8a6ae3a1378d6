// Package pgdriver is the PostgreSQL implementation of driver.Driver, on pgx v5.
//
// Claims use FOR UPDATE SKIP LOCKED so any number of workers can claim
// concurrently without blocking each other or receiving the same job. Every
// transition is one statement whose CTE locks the row under the lifecycle guard
// and appends the event, so a transition and its event commit together. Wake-ups
// use LISTEN/NOTIFY on a channel named after the schema, so several Drover
// installations in one database (or parallel tests in their own schemas) do not
// wake each other. Tables are prefixed drover_ so they can live beside an
// application's own tables, which is what makes enqueueing inside the
// application's transaction possible.
package pgdriver

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/deflog"
	"github.com/drover-dev/drover/internal/sqlfile"
)

//go:embed queries/*.sql
var queryFS embed.FS

var queries = sqlfile.MustLoad(queryFS, "queries/*.sql")

// queryVariant is the named query with old, which it must hold exactly once,
// replaced by new: a variant that cannot drift from the statement it is cut from.
func queryVariant(name, old, new string) string {
	return replaceOnce(queries.Get(name), old, new)
}

// replaceOnce is q with old, which it must hold exactly once, replaced by new.
func replaceOnce(q, old, new string) string {
	if strings.Count(q, old) != 1 {
		panic("pgdriver: a query must hold " + old + " exactly once:\n" + q)
	}
	return strings.Replace(q, old, new, 1)
}

// Options tune the driver.
type Options struct {
	// Logger receives driver diagnostics. Nil: warnings and errors go
	// through slog.Default().
	Logger *slog.Logger
}

// Driver is a driver.Driver on a pgx connection pool.
type Driver struct {
	pool    *pgxpool.Pool
	owned   bool // the pool was opened by New and is closed by Close
	channel string
	schema  string // current_schema() of the pool's sessions, where its tables are
	dbName  string // current_database() of the pool's sessions
	log     *slog.Logger
	cursors claimCursors
	wakeups wakeSender
	closed  atomic.Bool

	// The wake-up subscriptions' LISTEN connections are the driver's own,
	// not the pool's: Close ends them (life) and waits for them (subs).
	// subsMu orders a subscription's start against Close.
	life    context.Context
	endLife context.CancelFunc
	subsMu  sync.Mutex
	subs    sync.WaitGroup
}

var _ driver.Driver = (*Driver)(nil)

// New connects to the database at url (a postgres:// URL or key=value DSN). A
// search_path parameter in the URL selects the schema.
func New(ctx context.Context, url string, opts Options) (*Driver, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, driver.Invalid("database_url", "cannot parse PostgreSQL URL: %s", redact(err))
	}
	// Drover's statements are short: a JIT compile (tens of ms) is never repaid,
	// and it starts whenever a plan's estimated cost passes jit_above_cost, which
	// on a large table can happen to a claim. The statements are written to stay
	// below it; this makes sure of it on the pools Drover opens (a URL's own
	// jit setting still wins). Pools passed to NewFromPool are left as they are.
	if _, set := cfg.ConnConfig.RuntimeParams["jit"]; !set {
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	// Timestamps come back as text from the statements run without a prepared
	// description (QueryExecModeExec), and pgx reads only the ISO style: under
	// another DateStyle a claim by id committed and then failed to read its
	// answer, leaving its jobs leased to nobody. A connection whose session
	// reports another style (a database or role default) sets ISO when it
	// opens; one that reports ISO, as by PostgreSQL's default, costs nothing.
	// Only the output style is set: the database's date order (DMY, say),
	// which the caller's own SQL on the pool reads dates in, stays (a startup
	// parameter of ISO alone reset it to MDY). PgBouncer tracks DateStyle for
	// each client, so the SET follows the client.
	if style, set := runtimeParam(cfg.ConnConfig.RuntimeParams, "datestyle"); set && namesOtherDateStyle(style) {
		return nil, driver.Invalid("database_url", "datestyle=%q: Drover reads timestamps in the ISO style; leave datestyle out or set it to ISO", style)
	} else if !set {
		prev := cfg.AfterConnect
		cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			if prev != nil {
				if err := prev(ctx, c); err != nil {
					return err
				}
			}
			if isISODateStyle(c.PgConn().ParameterStatus("DateStyle")) {
				return nil
			}
			_, err := c.Exec(ctx, "SET DateStyle TO ISO")
			return err
		}
	}
	setKeepalives(cfg.ConnConfig)
	// Every statement is written for READ COMMITTED (see NewFromPool).
	if iso, set := cfg.ConnConfig.RuntimeParams[isolationParam]; set && !isReadCommitted(iso) {
		hint := ""
		if strings.Contains(iso, "+") {
			hint = " (a URL's + is not read as a space here: write read%20committed)"
		}
		return nil, driver.Invalid("database_url", "%s=%q: Drover's statements need read committed%s", isolationParam, iso, hint)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	d, err := NewFromPool(ctx, pool, opts)
	var iso *isolationError
	var style *dateStyleError
	if errors.As(err, &style) {
		err = driver.Invalid("database_url", "the sessions' DateStyle is %q; Drover reads timestamps in the ISO style: set DateStyle to ISO for the role or the database", style.style)
	}
	if errors.As(err, &iso) {
		// The database's or the role's default: the URL can ask for read
		// committed. (Drover does not ask on every connection itself: an
		// unknown startup parameter stops PgBouncer from connecting.)
		err = driver.Invalid("database_url", "the database's sessions default to %s isolation; Drover's statements need read committed: "+
			"set it for the role or the database (ALTER ROLE … SET %[2]s = 'read committed'), or, without PgBouncer in between, "+
			"ask for it in the URL (?%[2]s=read%%20committed; %[2]s='read committed' in a key=value DSN)", iso.level, isolationParam)
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	d.owned = true
	return d, nil
}

// NewFromPool wraps an existing pool; Close leaves the pool open. The pool's
// sessions must default to READ COMMITTED isolation, PostgreSQL's own default;
// NewFromPool refuses a pool whose sessions do not. Besides the
// pool's connections the driver opens only one per wake-up subscription, for
// LISTEN (WakeupSubscribe).
func NewFromPool(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Driver, error) {
	d := &Driver{pool: pool, log: opts.Logger}
	d.life, d.endLife = context.WithCancel(context.Background())
	if d.log == nil {
		d.log = deflog.New()
	}
	var schema *string
	var iso, style, dbName string
	if err := pool.QueryRow(ctx, "SELECT current_schema(), current_setting('"+isolationParam+"'), current_setting('DateStyle'), current_database()").Scan(&schema, &iso, &style, &dbName); err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	if schema == nil {
		// current_schema() is NULL when no schema search_path names exists.
		var path string
		_ = pool.QueryRow(ctx, "SELECT current_setting('search_path')").Scan(&path)
		return nil, fmt.Errorf("connect to PostgreSQL: search_path %q names no schema that exists: CREATE SCHEMA it first, or name one that exists", path)
	}
	if !isISODateStyle(style) {
		return nil, &dateStyleError{style}
	}
	if !isReadCommitted(iso) {
		// Under REPEATABLE READ or SERIALIZABLE a statement that waits for a row
		// another transaction then changes fails with 40001 where READ
		// COMMITTED rechecks the row: concurrent claims failed, and one
		// heartbeat failed a whole batch of completions. Only a transaction
		// Drover begins itself could ask for its own level.
		return nil, &isolationError{iso}
	}
	d.channel, d.schema, d.dbName = wakeupChannel(*schema), *schema, dbName
	return d, nil
}

// keepalives are the server's TCP keepalive settings for the sessions of the
// pools New opens, where neither the URL nor the server's configuration (the
// configuration file, the role's or the database's defaults) sets them.
//
// A replica whose host is lost (power, a partition) rather than its process
// killed sends nothing more, not even the FIN that ends its sessions: a session
// it left in a claim's transaction went on holding the claimed rows' locks, and
// one that held a request_id's advisory lock (outside any transaction) made a
// resend of that claim to another replica wait, until PostgreSQL noticed the
// connection was dead, by the operating system's keepalives: two hours and
// eleven minutes on Linux. With these a session whose client has answered
// nothing for a minute is probed every ten seconds and ended after six
// unanswered probes: two minutes. A live client's kernel answers the probes
// whatever its process is doing, so they end no session that is merely slow,
// idle, or inside a long statement (a migration, a caller's own transaction).
//
// idle_in_transaction_session_timeout is not set: the pool is the caller's
// too (Pool, EnqueueTx), and would end a caller's transaction that waits on
// its own work, and it does not reach the request_id lock, which a session
// holds idle outside a transaction. tcp_user_timeout is not set either (see
// README).
var keepalives = [][2]string{
	{"tcp_keepalives_idle", "60"},
	{"tcp_keepalives_interval", "10"},
	{"tcp_keepalives_count", "6"},
}

// setKeepalives makes each connection of cfg, and of every copy of it (the
// wake-up listener's), set the keepalives its session does not already have
// from the URL or the server's configuration. A SET, not a startup
// parameter: a startup parameter would override the server's configuration,
// and PgBouncer refuses one it is not told to ignore.
func setKeepalives(cfg *pgx.ConnConfig) {
	var names, values []string
	for _, kv := range keepalives {
		if _, set := runtimeParam(cfg.RuntimeParams, kv[0]); set {
			continue
		}
		names, values = append(names, kv[0]), append(values, kv[1])
	}
	if len(names) == 0 {
		return
	}
	q := "SELECT set_config(name, v, false) FROM pg_settings JOIN unnest('{" + strings.Join(names, ",") + "}'::text[], '{" +
		strings.Join(values, ",") + "}'::text[]) AS k(name, v) USING (name) WHERE source = 'default'"
	prev := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, c *pgconn.PgConn) error {
		if prev != nil {
			if err := prev(ctx, c); err != nil {
				return err
			}
		}
		if _, err := c.Exec(ctx, q).ReadAll(); err != nil {
			return fmt.Errorf("set TCP keepalives: %w", err)
		}
		return nil
	}
}

// wakeupChannel is the LISTEN/NOTIFY channel of the schema's wake-ups:
// "drover_wakeup_" and the schema's name, or, when that is longer than a
// channel may be (63 bytes), a hash of the name in its place. A schema of
// 50 bytes or more (PostgreSQL allows 63) made pg_notify fail every enqueue
// in a caller's transaction, and LISTEN cut the name, so no wake-up came.
func wakeupChannel(schema string) string {
	const prefix, maxLen = "drover_wakeup_", 63
	if len(prefix)+len(schema) <= maxLen {
		return prefix + schema
	}
	sum := sha256.Sum256([]byte(schema))
	return prefix + hex.EncodeToString(sum[:16])
}

// isolationParam is the setting Drover's sessions need at read committed.
const isolationParam = "default_transaction_isolation"

// isReadCommitted reports whether PostgreSQL runs level as READ COMMITTED, as
// it runs READ UNCOMMITTED.
func isReadCommitted(level string) bool {
	l := strings.ToLower(strings.Join(strings.Fields(level), " "))
	return l == "read committed" || l == "read uncommitted"
}

// isolationError is NewFromPool's refusal of a pool whose sessions default to
// another isolation level than READ COMMITTED; errors.Is(err,
// driver.ErrInvalidArgument) holds for it, as for New's ValidationError.
type isolationError struct{ level string }

func (e *isolationError) Unwrap() error { return driver.ErrInvalidArgument }

func (e *isolationError) Error() string {
	return fmt.Sprintf("the pool's sessions default to %s isolation; Drover's statements need read committed: set it for the role or the database, or RuntimeParams[%q] = \"read committed\" in the pool's config", e.level, isolationParam)
}

// runtimeParam looks a startup parameter up by name, as PostgreSQL does, without
// regard to case.
func runtimeParam(params map[string]string, name string) (string, bool) {
	for k, v := range params {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// isISODateStyle reports whether a DateStyle setting ("ISO, MDY") writes
// timestamps in the ISO style, the one pgx reads from text.
func isISODateStyle(style string) bool {
	first, _, _ := strings.Cut(style, ",")
	return strings.EqualFold(strings.TrimSpace(first), "ISO")
}

// namesOtherDateStyle reports whether a DateStyle setting asks for an output
// style other than ISO ("SQL, DMY"); a date order alone ("DMY") does not.
func namesOtherDateStyle(style string) bool {
	for _, f := range strings.FieldsFunc(style, func(r rune) bool { return r == ',' || r == ' ' }) {
		switch strings.ToUpper(f) {
		case "SQL", "POSTGRES", "GERMAN":
			return true
		}
	}
	return false
}

// dateStyleError is NewFromPool's refusal of a pool whose sessions write
// timestamps in another style than ISO; errors.Is(err,
// driver.ErrInvalidArgument) holds for it.
type dateStyleError struct{ style string }

func (e *dateStyleError) Unwrap() error { return driver.ErrInvalidArgument }

func (e *dateStyleError) Error() string {
	return fmt.Sprintf("the pool's sessions write timestamps in the %s DateStyle; Drover reads them in the ISO style: set DateStyle to ISO for the role or the database, or RuntimeParams[\"DateStyle\"] = \"ISO\" in the pool's config", e.style)
}

// Pool returns the connection pool, for callers that begin their own transactions.
func (d *Driver) Pool() *pgxpool.Pool { return d.pool }

// Name implements driver.Driver.
func (d *Driver) Name() string { return "postgres" }

// Ping implements driver.Driver.
func (d *Driver) Ping(ctx context.Context) error { return d.pool.Ping(ctx) }

// Close implements driver.Driver. It ends every wake-up subscription (its
// channel closes) and closes their connections before it returns, and closes
// the pool if New opened it.
func (d *Driver) Close() error {
	d.subsMu.Lock()
	d.closed.Store(true)
	d.endLife()
	d.subsMu.Unlock()
	d.subs.Wait()
	if d.owned {
		d.pool.Close()
	}
	return nil
}

// dbtx is what both the pool and a transaction offer.
type dbtx interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// redact drops the password pgx may echo back from a URL.
func redact(err error) string {
	s := err.Error()
	if i := strings.Index(s, "cannot parse `"); i >= 0 {
		if j := strings.Index(s[i+14:], "`"); j >= 0 {
			s = s[:i] + "cannot parse URL" + s[i+14+j+1:]
		}
	}
	return s
}

var errNoRows = pgx.ErrNoRows

func isNoRows(err error) bool { return errors.Is(err, errNoRows) }
