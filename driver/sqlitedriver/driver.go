package sqlitedriver

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/deflog"
	"github.com/drover-dev/drover/internal/sqlfile"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

//go:embed queries/*.sql
var queryFS embed.FS

// queries holds every runtime statement of this package, by name.
var queries = sqlfile.MustLoad(queryFS, "queries/*.sql")

var _ driver.Driver = (*Driver)(nil)

// Options configures Open.
type Options struct {
	// Logger receives driver diagnostics. Nil: warnings and errors go
	// through slog.Default().
	Logger *slog.Logger
	// ReadConns is the size of the read-only connection pool (default 4). Writes
	// always go through a single connection because SQLite has one writer.
	ReadConns int
}

// Driver is the SQLite implementation of driver.Driver. It is safe for concurrent
// use, and several processes may open the same database file.
type Driver struct {
	write  *sql.DB // one connection: SQLite serialises writers anyway
	read   *sql.DB // WAL readers; the same pool as write for in-memory databases
	logger *slog.Logger
	wake   *broadcaster
	file   string // the main database's file ("" in memory), which a caller's tx must be on

	purgeBatch int // JobDLQPurge's batch; 0: purgeBatch

	bulkMu   sync.Mutex
	bulkNext time.Time // a bulk delete's next transaction begins no sooner (bulkTx)
}

// Open opens (creating if needed) the SQLite database at path, a file path such as
// "./drover.db" or a "file:" URI. It does not migrate; call MigrateUp. A
// relative name is taken against the working directory when Open runs, for
// the life of the Driver, whatever directory the process changes to later.
//
// Every connection runs with journal_mode=WAL, synchronous=FULL (a committed job
// survives power loss), foreign_keys=on and busy_timeout=10000, the writer with
// journal_size_limit=64 MiB (the WAL's size after a checkpoint), and write
// transactions begin IMMEDIATE so they hold the write lock from their first
// statement instead of failing with SQLITE_BUSY when they upgrade. A file:
// URI may carry parameters of its own, but one that sets any of these to
// another value (_txlock=deferred, _busy_timeout=0, _pragma=synchronous(0), …)
// is refused, as are _query_only, nolock or immutable (SQLite's locking
// off) and, but for an in-memory database, cache=shared (table locks instead
// of WAL's snapshots between the driver's readers and its writer) and
// _pragma=locking_mode(exclusive) (the writer keeps the file locked). So is a file SQLite leaves out of WAL (it does so without an error).
func Open(path string, opts Options) (*Driver, error) {
	logger := opts.Logger
	if logger == nil {
		logger = deflog.New()
	}
	file, err := absolute(path)
	if err != nil {
		return nil, err
	}
	writeDSN, err := dsn(file, false)
	if err != nil {
		return nil, err
	}
	write := openDB(writeDSN)
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	// Ping creates the file and switches it to WAL before any reader opens it.
	if err := connect(write, isMemory(path)); err != nil {
		write.Close()
		if dir := missingDir(file); dir != "" {
			// SQLite says only "unable to open database file".
			return nil, fmt.Errorf("open sqlite %q: the directory %q does not exist: %w", path, dir, err)
		}
		return nil, fmt.Errorf("open sqlite %q: %w", path, err)
	}

	d := &Driver{write: write, read: write, logger: logger, wake: newBroadcaster()}
	if err := write.QueryRow(mainFileQuery).Scan(&d.file); err != nil {
		write.Close()
		return nil, fmt.Errorf("open sqlite %q: %w", path, err)
	}
	if isMemory(path) {
		// Each connection to ":memory:" is its own database: share the one writer.
		return d, nil
	}
	readDSN, err := dsn(file, true)
	if err != nil {
		write.Close()
		return nil, err
	}
	read := openDB(readDSN)
	n := opts.ReadConns
	if n <= 0 {
		n = 4
	}
	read.SetMaxOpenConns(n)
	read.SetMaxIdleConns(n)
	d.read = read
	return d, nil
}

// openBusyWait bounds how long Open tries again while SQLite answers busy.
const openBusyWait = 10 * time.Second

// connect opens write's connection, which creates the file and applies the
// DSN's pragmas, WAL among them, and checks that the file is in WAL (unless
// it is in memory). Processes opening one new file at once found SQLite
// answering the switch to WAL with SQLITE_BUSY at once, without waiting in
// its busy handler (a lock upgrade that could deadlock is not waited for):
// one of four processes' Open failed with "database is locked" in about a
// round in four. A busy answer is tried again, for up to openBusyWait.
func connect(write *sql.DB, memory bool) error {
	deadline := time.Now().Add(openBusyWait)
	for {
		err := connectOnce(write, memory)
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond) // SQLite's busy handler would have waited; it did not
	}
}

func connectOnce(write *sql.DB, memory bool) error {
	if err := write.Ping(); err != nil {
		return err
	}
	if memory {
		return nil
	}
	// SQLite leaves a file it cannot put in WAL (a VFS without shared memory,
	// another process's exclusive lock) in its old mode without an error: the
	// switch is asked again, and the file refused if it stays out.
	var mode string
	if err := write.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if strings.EqualFold(mode, "wal") {
		return nil
	}
	if err := write.QueryRow("PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("the file could not be switched to WAL (journal_mode is %s), which the driver needs", mode)
	}
	return nil
}

// absolute returns path with a relative file name made absolute against the
// working directory of now. The pools open connections long after Open (a
// reader when those open are busy, the writer again after database/sql
// dropped it, as it does when a call's context ends while it waits for
// another process's lock), and each opened a relative name against the
// directory of its moment: a process that had changed directory since went on
// in another file, or in a new empty one.
func absolute(path string) (string, error) {
	if path == "" || isMemory(path) {
		return path, nil
	}
	rest, uri := strings.CutPrefix(path, "file:")
	if !uri {
		if filepath.IsAbs(path) {
			return path, nil
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return "", fmt.Errorf("open sqlite %q: %w", path, err)
		}
		if strings.Contains(abs, "?") && !strings.Contains(path, "?") {
			return "file:" + uriName(abs), nil // the driver cuts a plain path at '?'
		}
		return abs, nil
	}
	// A file: URI's name ends at '?' or '#'; "file://" has an authority and
	// "file:/" an absolute name.
	if strings.HasPrefix(rest, "/") || rest == "" || rest[0] == '?' || rest[0] == '#' {
		return path, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("open sqlite %q: %w", path, err)
	}
	return "file:" + strings.TrimSuffix(uriName(wd), "/") + "/" + rest, nil
}

// missingDir returns the directory of file (as absolute returns it) if it does
// not exist, else "".
func missingDir(file string) string {
	if isMemory(file) {
		return ""
	}
	name, uri := strings.CutPrefix(file, "file:")
	if uri {
		name, _, _ = strings.Cut(name, "?")
		name, _, _ = strings.Cut(name, "#")
		if strings.HasPrefix(name, "//") {
			return "" // an authority: leave it to SQLite
		}
		unescaped, err := url.PathUnescape(name)
		if err != nil {
			return ""
		}
		if len(unescaped) > 2 && unescaped[0] == '/' && unescaped[2] == ':' {
			unescaped = unescaped[1:] // a Windows drive: /C:/…
		}
		name = filepath.FromSlash(unescaped)
	}
	dir := filepath.Dir(name)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return dir
	}
	return ""
}

// uriName spells an absolute file name as a file: URI's: SQLite decodes %HH in
// it and ends it at '?' or '#'.
func uriName(name string) string {
	name = filepath.ToSlash(name)
	if !strings.HasPrefix(name, "/") {
		name = "/" + name // a Windows drive: file:/C:/…
	}
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(name)
}

// mainFileQuery answers the file of a connection's main database.
const mainFileQuery = "SELECT file FROM pragma_database_list WHERE name = 'main'"

// walSizeLimit is the size the WAL is truncated to after a checkpoint.
const walSizeLimit = 64 << 20

// dsn adds the connection settings to path. Read connections are query_only so a
// misrouted write fails loudly instead of contending with the writer.
func dsn(path string, readOnly bool) (string, error) {
	if path == "" {
		return "", errors.New("open sqlite: empty path")
	}
	q := url.Values{}
	q.Set("_busy_timeout", "10000")
	q.Set("_foreign_keys", "on")
	q.Set("_synchronous", "FULL")
	if readOnly {
		q.Set("_query_only", "on")
	} else {
		q.Set("_journal_mode", "WAL")
		q.Set("_txlock", "immediate")
		// The WAL grows while any reader (a backup, an operator's sqlite3
		// shell) holds the checkpoint back, and kept its largest size for as
		// long as the file stayed open: 116 MB after a 20 s read at 500
		// jobs/s. Past a checkpoint, it is cut back to this.
		q.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", walSizeLimit))
	}
	params := q.Encode()
	if strings.HasPrefix(path, "file:") {
		if _, query, ok := strings.Cut(path, "?"); ok {
			if err := checkCallerParams(query, isMemory(path)); err != nil {
				// Bad input, named so (exit 2 in the CLI), as a bad
				// PostgreSQL URL is.
				return "", fmt.Errorf("open sqlite %q: %w", path, driver.Invalid("database_url", "%v", err))
			}
			return path + "&" + params, nil
		}
		return path + "?" + params, nil
	}
	// The driver cuts a plain path at its first "?", so a "?" in the name would
	// silently open another file.
	if strings.ContainsAny(path, "?") {
		return "", fmt.Errorf("open sqlite %q: %w", path, driver.Invalid("database_url", "a plain path must not contain '?'; use a file: URI"))
	}
	return path + "?" + params, nil
}

// driverSettings are the connection settings dsn makes, by the pragma each sets,
// in a form a caller's value is compared in (settingValue). The driver reads a
// repeated parameter's first value, so a caller's in a file: URI came before
// ours and replaced it without a word: _txlock=deferred made two processes'
// claims fail at once with "database is locked" instead of waiting their turn
// (SQLite cannot wait out a deferred transaction's lock upgrade), and
// _synchronous=OFF lost committed jobs at a power cut.
var driverSettings = map[string]string{
	"busy_timeout": "10000",
	"foreign_keys": "1",
	"synchronous":  "2",
	"journal_mode": "wal",
	"txlock":       "immediate",
	"query_only":   "", // on for readers, off for the writer: no value fits both
}

// callerParamPragmas maps the DSN parameters (modernc's and mattn's aliases)
// to the pragma they set.
var callerParamPragmas = map[string]string{
	"_busy_timeout": "busy_timeout", "_timeout": "busy_timeout",
	"_foreign_keys": "foreign_keys", "_fk": "foreign_keys",
	"_synchronous": "synchronous", "_sync": "synchronous",
	"_journal_mode": "journal_mode", "_journal": "journal_mode",
	"_txlock":     "txlock",
	"_query_only": "query_only",
}

// checkCallerParams refuses a file: URI's parameter, shorthand or _pragma,
// that sets one of driverSettings to another value than the driver's, or
// that takes away what the driver relies on: SQLite's locking (nolock,
// immutable) and, on a file, each connection's own cache (cache=shared) and
// locks let go after each transaction (locking_mode other than NORMAL).
func checkCallerParams(query string, memory bool) error {
	q, err := url.ParseQuery(query)
	if err != nil {
		return fmt.Errorf("parameters: %w", err)
	}
	for key, vals := range q {
		for _, v := range vals {
			if (key == "nolock" || key == "immutable") && boolValue(v) == "1" {
				return fmt.Errorf("%s=%s turns SQLite's locking off, and with it what keeps two processes from claiming one job or corrupting the file; remove it", key, v)
			}
			// In shared-cache mode the readers and the writer share one
			// cache, and table locks replace WAL's snapshots between them:
			// a read waited for the whole of any write transaction (for
			// ever when the goroutine holding it read), and with
			// read_uncommitted it answered jobs of a transaction that then
			// rolled back. An in-memory database has one connection.
			if key == "cache" && strings.EqualFold(v, "shared") && !memory {
				return fmt.Errorf("%s=%s makes the driver's readers wait for its writer's transactions, or with read_uncommitted see their uncommitted jobs; remove it", key, v)
			}
			name, val := callerParamPragmas[key], v
			if key == "_pragma" {
				name, val = splitPragma(v)
			}
			// EXCLUSIVE keeps the writer's lock for the life of its
			// connection: every read of the driver's readers failed
			// "database is locked" after busy_timeout, and every other
			// process's Open at once.
			if name == "locking_mode" && !strings.EqualFold(val, "normal") && !memory {
				return fmt.Errorf("%s=%s: locking mode %s keeps the writer's lock on the file, and the driver's readers and other processes fail with \"database is locked\"; remove it", key, v, val)
			}
			want, ok := driverSettings[name]
			if !ok || (want != "" && settingValue(name, val) == want) {
				continue
			}
			if want == "" {
				return fmt.Errorf("%s=%s: the driver sets %s itself (on for its readers, off for its writer); remove it", key, v, name)
			}
			return fmt.Errorf("%s=%s: the driver sets %s to %s itself, as Open documents; remove it", key, v, name, want)
		}
	}
	return nil
}

// splitPragma splits a _pragma value, "name(value)" or "name = value".
func splitPragma(v string) (name, val string) {
	v = strings.TrimSpace(v)
	if i := strings.IndexAny(v, "(="); i >= 0 {
		name, val = v[:i], strings.TrimSuffix(strings.TrimSpace(v[i+1:]), ")")
	} else {
		name = v
	}
	name = strings.ToLower(strings.TrimSpace(name))
	if _, pragma, ok := strings.Cut(name, "."); ok {
		name = pragma // main.journal_mode
	}
	return name, strings.Trim(strings.TrimSpace(val), `'"`)
}

// boolValue spells a boolean as "1" or "0", as SQLite reads it; anything else
// as given.
func boolValue(val string) string {
	switch val = strings.ToLower(strings.TrimSpace(val)); val {
	case "1", "on", "true", "yes":
		return "1"
	case "0", "off", "false", "no":
		return "0"
	}
	return val
}

// settingValue spells val of pragma name as driverSettings does.
func settingValue(name, val string) string {
	val = strings.ToLower(strings.TrimSpace(val))
	switch name {
	case "foreign_keys", "query_only":
		return boolValue(val)
	case "synchronous":
		if n, ok := map[string]string{"off": "0", "normal": "1", "full": "2", "extra": "3"}[val]; ok {
			return n
		}
	}
	return val
}

func isMemory(path string) bool {
	return path == ":memory:" || strings.Contains(path, "mode=memory") || strings.HasPrefix(path, "file::memory:")
}

// DB returns the write pool, on which callers begin the *sql.Tx they pass to
// JobInsertManyTx. It has a single connection: finish the transaction promptly.
func (d *Driver) DB() *sql.DB { return d.write }

// Name returns "sqlite".
func (d *Driver) Name() string { return "sqlite" }

// Ping checks the database is reachable, through the read pool: the one
// write connection is held for as long as a write transaction runs (a purge, a
// caller's JobInsertManyTx), and a ping waiting for it made /healthz answer
// 503 for a database that answered every read.
func (d *Driver) Ping(ctx context.Context) error {
	if err := d.read.PingContext(ctx); err != nil {
		return fmt.Errorf("ping sqlite: %w", err)
	}
	return nil
}

// Close closes the connection pools and every wake-up subscription.
func (d *Driver) Close() error {
	d.wake.close()
	var errs []error
	if d.read != d.write {
		errs = append(errs, d.read.Close())
	}
	errs = append(errs, d.write.Close())
	return errors.Join(errs...)
}

// inTx runs fn in a write transaction (BEGIN IMMEDIATE through _txlock) and
// commits if fn returns nil.
func (d *Driver) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := d.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// querier is what *sql.DB and *sql.Tx share.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// clock returns the time a call acts at: the injected one, else the process clock.
func clock(now *time.Time) time.Time {
	if now != nil {
		return now.UTC()
	}
	return time.Now().UTC()
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }
