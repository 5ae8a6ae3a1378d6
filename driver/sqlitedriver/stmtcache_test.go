package sqlitedriver

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// TestStatementCache: a cached statement reused while its rows are still open gets
// a fresh statement (the open rows are not reset), and multi-statement scripts run
// whole rather than being prepared (which would run only their first statement).
func TestStatementCache(t *testing.T) {
	ctx := context.Background()
	db := openDB("file:" + filepath.Join(t.TempDir(), "c.db"))
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (1); INSERT INTO t VALUES (2);"); err != nil {
		t.Fatal(err)
	}
	var count int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&count); err != nil || count != 2 {
		t.Fatalf("multi-statement script: count = %d, %v; want 2 (every statement ran)", count, err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	const q = "SELECT n FROM t ORDER BY n"
	outer, err := tx.QueryContext(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for outer.Next() {
		var n int
		if err := outer.Scan(&n); err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
		// The same text again while outer is open must not disturb outer.
		var inner int
		if err := tx.QueryRowContext(ctx, q).Scan(&inner); err != nil || inner != 1 {
			t.Fatalf("inner query while outer rows are open: %d, %v", inner, err)
		}
	}
	if err := outer.Err(); err != nil {
		t.Fatal(err)
	}
	outer.Close()
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("outer rows = %v, want [1 2]", got)
	}
	for i := 0; i < 3; i++ { // reused after close
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM t WHERE n > ?", 0).Scan(&count); err != nil || count != 2 {
			t.Fatalf("cached statement reuse %d: %d, %v", i, count, err)
		}
	}
}

// TestCacheable: one statement is cached whatever its comments and literals
// hold; a script of several is not.
func TestCacheable(t *testing.T) {
	for _, c := range []struct {
		q    string
		want bool
	}{
		{"SELECT 1", true},
		{"SELECT 1;", true},
		{"-- a comment; with a semicolon\nSELECT 1;\n", true},
		{"SELECT ';' AS s /* ; */ -- ;\n", true},
		{`SELECT "a;b" FROM t WHERE x = 'it''s; fine'`, true},
		{"SELECT 1; SELECT 2", false},
		{"CREATE TABLE t (n INTEGER);\n-- next\nINSERT INTO t VALUES (1);", false},
		{"-- only a comment; nothing else", false},
		{"", false},
		{"SELECT 1 /* unterminated", false},
	} {
		if got := cacheable(c.q); got != c.want {
			t.Errorf("cacheable(%q) = %v, want %v", c.q, got, c.want)
		}
	}
	for name, q := range queries {
		if !cacheable(q) {
			t.Errorf("query %s is not cacheable: every runtime query must be one statement", name)
		}
	}
}

// TestStatementCacheIsBounded: SQL texts that are never repeated (values
// built into the text, as callers of DB() may run) do not pile up prepared
// statements: the cache keeps at most maxCachedStmts, the ones used last, and
// never closes a statement whose rows are open.
func TestStatementCacheIsBounded(t *testing.T) {
	ctx := context.Background()
	db := openDB("file:" + filepath.Join(t.TempDir(), "c.db"))
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (1); INSERT INTO t VALUES (2);"); err != nil {
		t.Fatal(err)
	}
	open, err := conn.QueryContext(ctx, "SELECT n FROM t ORDER BY n")
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	var first, second int
	if !open.Next() || open.Scan(&first) != nil || first != 1 {
		t.Fatalf("first row of the open query: %d, %v", first, open.Err())
	}
	const hot = "SELECT count(*) FROM t WHERE n > ?"
	for i := range 3 * maxCachedStmts {
		var n int
		if err := conn.QueryRowContext(ctx, fmt.Sprintf("SELECT n + %d FROM t ORDER BY n LIMIT 1", i)).Scan(&n); err != nil || n != 1+i {
			t.Fatalf("statement %d: %d, %v", i, n, err)
		}
		if err := conn.QueryRowContext(ctx, hot, 0).Scan(&n); err != nil || n != 2 {
			t.Fatalf("hot statement after %d: %d, %v", i, n, err)
		}
	}
	// The open rows' statement was the least recently used all along.
	if !open.Next() || open.Scan(&second) != nil || second != 2 {
		t.Fatalf("second row of the query left open: %d, %v", second, open.Err())
	}
	if err := open.Close(); err != nil {
		t.Fatal(err)
	}
	err = conn.Raw(func(dc any) error {
		c := dc.(*cachingConn)
		if len(c.stmts) > maxCachedStmts || c.lru.Len() != len(c.stmts) {
			t.Errorf("cache holds %d statements (%d in its order), want at most %d", len(c.stmts), c.lru.Len(), maxCachedStmts)
		}
		if c.stmts[hot] == nil {
			t.Errorf("the statement used after every other one was evicted")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
