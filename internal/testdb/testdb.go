// Package testdb gives each test its own database: a fresh PostgreSQL schema or a
// fresh SQLite file, so tests run in parallel without seeing each other's rows.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultPostgresURL is used when DROVER_TEST_DATABASE_URL is unset.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// PostgresBaseURL returns the server tests use.
func PostgresBaseURL() string {
	if u := os.Getenv("DROVER_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultPostgresURL
}

// PostgresURL creates a schema private to t (dropped at cleanup) and returns a URL
// whose search_path selects it. If PostgreSQL is unreachable the test is skipped,
// except under CI=true, where it fails: CI must never pass by skipping.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := PostgresBaseURL()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn := Connect(ctx, t)
	defer conn.Close(context.Background())
	schema := "t_" + randomHex(8)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	})
	return WithSearchPath(base, schema)
}

// Connect connects to the tests' PostgreSQL server (PostgresBaseURL); the
// caller closes the connection. If PostgreSQL is unreachable the test is
// skipped, except under CI=true, where it fails.
func Connect(ctx context.Context, t testing.TB) *pgx.Conn {
	t.Helper()
	base := PostgresBaseURL()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL unreachable at %s (CI=true, so this fails instead of skipping): %v", base, err)
		}
		t.Skipf("PostgreSQL unreachable at %s: %v", base, err)
	}
	return conn
}

// WithSearchPath returns base with search_path set to schema.
func WithSearchPath(base, schema string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// SQLitePath returns a fresh database file in t's temporary directory.
func SQLitePath(t testing.TB) string {
	return t.TempDir() + "/drover.db"
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
