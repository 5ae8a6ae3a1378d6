package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// postgres is the harness's own PostgreSQL cluster: initdb into a temporary
// directory, its own port on loopback and its own socket directory, so crashing
// it touches no other database on the machine.
type postgres struct {
	bin     string // directory of initdb, pg_ctl, postgres
	dir     string // data directory
	logFile string
	port    int
	runAs   string // OS user to run the binaries as ("" when not root)
}

// findPostgresBin returns the directory holding pg_ctl: $DROVER_CHAOS_PG_BIN, the
// newest /usr/lib/postgresql/*/bin, or the one on PATH.
func findPostgresBin() (string, error) {
	if d := os.Getenv("DROVER_CHAOS_PG_BIN"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) < pgVersion(dirs[j]) })
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "pg_ctl")); err == nil {
			return dirs[i], nil
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no PostgreSQL binaries found (looked in /usr/lib/postgresql/*/bin and PATH); install postgresql or set DROVER_CHAOS_PG_BIN")
}

func pgVersion(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

// startPostgres creates and starts a cluster under work and returns it with a
// database named chaos.
func startPostgres(ctx context.Context, work string) (*postgres, string, error) {
	bin, err := findPostgresBin()
	if err != nil {
		return nil, "", err
	}
	pg := &postgres{bin: bin, dir: filepath.Join(work, "pg"), logFile: filepath.Join(work, "postgres.log")}
	if err := os.MkdirAll(pg.dir, 0o700); err != nil {
		return nil, "", err
	}
	if f, err := os.Create(pg.logFile); err == nil {
		f.Close()
	}
	if os.Geteuid() == 0 {
		// initdb refuses to run as root: the cluster belongs to the postgres user.
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, "", fmt.Errorf("running as root needs a postgres OS user for initdb: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, p := range []string{work, pg.dir, pg.logFile} {
			if err := os.Chown(p, uid, gid); err != nil {
				return nil, "", err
			}
		}
		if err := os.Chmod(work, 0o755); err != nil {
			return nil, "", err
		}
		pg.runAs = "postgres"
	}
	if out, err := pg.cmd(ctx, "initdb", "-D", pg.dir, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		return nil, "", fmt.Errorf("initdb: %v\n%s", err, out)
	}
	if pg.port, err = freePort(); err != nil {
		return nil, "", err
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=200 -c shared_buffers=64MB", pg.port, pg.dir)
	if out, err := pg.cmd(ctx, "pg_ctl", "-D", pg.dir, "-l", pg.logFile, "-o", opts, "-w", "-t", "60", "start").CombinedOutput(); err != nil {
		pg.stop() // pg_ctl may have been interrupted after the postmaster started
		return nil, "", fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, tail(pg.logFile, 2000))
	}
	admin := pg.url("postgres", "chaos-harness")
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		pg.stop()
		return nil, "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE chaos"); err != nil {
		pg.stop()
		return nil, "", err
	}
	return pg, pg.url("chaos", ""), nil
}

// url is the database URL; app, when set, names the connection in pg_stat_activity
// so pg_terminate_backend can target one process.
func (pg *postgres) url(db, app string) string {
	u := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", pg.port, db)
	if app != "" {
		u += "&application_name=" + app
	}
	return u
}

func (pg *postgres) cmd(ctx context.Context, name string, args ...string) *exec.Cmd {
	path := filepath.Join(pg.bin, name)
	if pg.runAs != "" {
		return exec.CommandContext(ctx, "runuser", append([]string{"-u", pg.runAs, "--", path}, args...)...)
	}
	return exec.CommandContext(ctx, path, args...)
}

// crash restarts the cluster with an immediate (crash) shutdown: no checkpoint,
// every connection cut; the start runs crash recovery from the WAL.
func (pg *postgres) crash(ctx context.Context) error {
	out, err := pg.cmd(ctx, "pg_ctl", "-D", pg.dir, "-l", pg.logFile, "-m", "immediate", "-w", "-t", "60", "restart").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl restart -m immediate: %v\n%s\n%s", err, out, tail(pg.logFile, 2000))
	}
	return nil
}

// stop shuts the cluster down at once; the caller deletes the directory.
func (pg *postgres) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = pg.cmd(ctx, "pg_ctl", "-D", pg.dir, "-m", "immediate", "-w", "-t", "20", "stop").Run()
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	s := string(b)
	return strings.TrimSpace(s[max(0, len(s)-n):])
}
