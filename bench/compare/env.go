package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ensureDatabase creates the database named in dbURL if it does not exist, by
// connecting to the server's "postgres" database.
func ensureDatabase(ctx context.Context, dbURL string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err == nil {
		return conn.Close(ctx)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // invalid_catalog_name
		return fmt.Errorf("connect %s: %w", redactURL(dbURL), err)
	}
	u, perr := url.Parse(dbURL)
	if perr != nil {
		return err
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" || name == "postgres" || name == "test" {
		return fmt.Errorf("refusing to create database %q", name)
	}
	admin := *u
	admin.Path = "/postgres"
	ac, aerr := pgx.Connect(ctx, admin.String())
	if aerr != nil {
		return fmt.Errorf("connect to create database %q: %w", name, aerr)
	}
	defer ac.Close(ctx)
	if _, err := ac.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %q: %w", name, err)
	}
	logf("created database %s", name)
	return nil
}

// newPool opens a pool on schema with the same settings for every system; a
// system's pool explains its statements to ex (--explain), when ex is not nil.
// search_path is a run-time parameter pgx sends on every connection, set on the
// parsed config: written back into the URL's query, its re-encoding turned a
// space in another parameter (default_transaction_isolation=read%20committed)
// into a '+', which PostgreSQL refused.
func newPool(ctx context.Context, dbURL, schema string, maxConns int, ex *explainLog, system string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	if maxConns > 0 {
		cfg.MaxConns = int32(maxConns)
	}
	ex.configure(system, cfg)
	return pgxpool.NewWithConfig(ctx, cfg)
}

// resetSchema drops and recreates schema (everything of one system goes with it).
func resetSchema(ctx context.Context, admin *pgxpool.Pool, schema string) error {
	id := pgx.Identifier{schema}.Sanitize()
	if _, err := admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+id+" CASCADE"); err != nil {
		return err
	}
	_, err := admin.Exec(ctx, "CREATE SCHEMA "+id)
	return err
}

// settle runs between runs: VACUUM ANALYZE of the database, then a CHECKPOINT so
// one run's dirty pages are not flushed during the next.
func settle(ctx context.Context, admin *pgxpool.Pool) error {
	if _, err := admin.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		return fmt.Errorf("vacuum analyze: %w", err)
	}
	if _, err := admin.Exec(ctx, "CHECKPOINT"); err != nil {
		logf("checkpoint skipped: %v", err)
	}
	return nil
}

// machine describes where the numbers come from.
type machine struct {
	CPUs              int    `json:"cpus"`
	GOMAXPROCS        int    `json:"gomaxprocs"`
	GoVersion         string `json:"go_version"`
	OS                string `json:"os"`
	PostgreSQL        string `json:"postgresql"`
	SynchronousCommit string `json:"synchronous_commit"`
	Fsync             string `json:"fsync"`
	FullPageWrites    string `json:"full_page_writes"`
	SharedBuffers     string `json:"shared_buffers"`
	MaxConnections    string `json:"max_connections"`
	Autovacuum        string `json:"autovacuum"`
	PoolMaxConns      int32  `json:"pool_max_conns"`
	DroverCommit      string `json:"drover_commit,omitempty"`
	RiverVersion      string `json:"river_version"`
	CommandLine       string `json:"command_line"`
}

// describeMachine is describeBuild with PostgreSQL's settings and the pool size.
func describeMachine(ctx context.Context, admin *pgxpool.Pool, poolMax int32) machine {
	m := describeBuild(ctx)
	m.PoolMaxConns = poolMax
	for name, dst := range map[string]*string{
		"server_version": &m.PostgreSQL, "synchronous_commit": &m.SynchronousCommit, "fsync": &m.Fsync,
		"full_page_writes": &m.FullPageWrites, "shared_buffers": &m.SharedBuffers, "max_connections": &m.MaxConnections,
		"autovacuum": &m.Autovacuum,
	} {
		if err := admin.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(dst); err != nil {
			*dst = "?"
		}
	}
	return m
}

// describeBuild is what a run records without PostgreSQL: the machine, the Go
// toolchain, the command, Drover's commit (of the working directory's
// checkout, "+dirty" with uncommitted changes) and the River version built in.
func describeBuild(ctx context.Context) machine {
	m := machine{
		CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
		OS: runtime.GOOS + "/" + runtime.GOARCH, CommandLine: commandLine(),
	}
	if out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.DroverCommit = strings.TrimSpace(string(out))
		if st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			m.DroverCommit += "+dirty"
		}
	}
	m.RiverVersion = "?"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/riverqueue/river" {
				m.RiverVersion = d.Version
			}
		}
	}
	return m
}

// commandLine is the exact command, shell-quoted where needed.
func commandLine() string {
	parts := make([]string, len(os.Args))
	for i, a := range os.Args {
		if i == 0 {
			a = "go -C bench/compare run ."
			if !strings.Contains(os.Args[0], "go-build") {
				a = os.Args[0]
			}
			parts[i] = a
			continue
		}
		if a == "" || strings.ContainsAny(a, " \t'\"$&|;<>()*?[]#~`\\") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts[i] = a
	}
	return strings.Join(parts, " ")
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "compare: "+format+"\n", args...)
}
