package sqlitedriver

import (
	"container/list"
	"context"
	"database/sql"
	"database/sql/driver"
	"strings"

	"modernc.org/sqlite"
)

// openDB opens a pool whose connections keep one prepared statement per SQL text.
// database/sql does not cache statements, and modernc's driver prepares (parses)
// every query anew: profiling a burn-down showed the SQL parser taking about half
// of the worker's CPU. database/sql hands a connection to one goroutine at a time,
// so the per-connection cache needs no lock.
func openDB(dsn string) *sql.DB {
	return sql.OpenDB(&cachingConnector{dsn: dsn, drv: &sqlite.Driver{}})
}

type cachingConnector struct {
	dsn string
	drv *sqlite.Driver
}

func (c *cachingConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &cachingConn{inner: conn, stmts: map[string]*cachedStmt{}, lru: list.New()}, nil
}

func (c *cachingConnector) Driver() driver.Driver { return c.drv }

// innerConn is what modernc's connection implements and we forward.
type innerConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// maxCachedStmts bounds each connection's cache. The driver's own statements
// are fewer than half of it (each query, and each chunk size of a batch; see
// rows.go), so they stay; what it bounds is the SQL callers run on DB(): a
// text that is built with its values in it, or with a list of as many ? as it
// has values, is a new statement each time, and an unbounded cache kept every
// one of them prepared until the connection closed.
const maxCachedStmts = 256

type cachingConn struct {
	inner driver.Conn
	stmts map[string]*cachedStmt
	lru   *list.List // of *cachedStmt, the most recently used first
}

type cachedStmt struct {
	q    string
	stmt driver.Stmt
	busy bool // its rows are open: a second use must not reset them
	at   *list.Element
}

func (c *cachingConn) conn() innerConn { return c.inner.(innerConn) }

func (c *cachingConn) Prepare(q string) (driver.Stmt, error) { return c.inner.Prepare(q) }
func (c *cachingConn) Begin() (driver.Tx, error) {
	return c.conn().BeginTx(context.Background(), driver.TxOptions{})
}
func (c *cachingConn) BeginTx(ctx context.Context, o driver.TxOptions) (driver.Tx, error) {
	return c.conn().BeginTx(ctx, o)
}
func (c *cachingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	return c.conn().PrepareContext(ctx, q)
}
func (c *cachingConn) Ping(ctx context.Context) error         { return c.conn().Ping(ctx) }
func (c *cachingConn) ResetSession(ctx context.Context) error { return c.conn().ResetSession(ctx) }
func (c *cachingConn) IsValid() bool                          { return c.conn().IsValid() }

func (c *cachingConn) Close() error {
	for _, s := range c.stmts {
		_ = s.stmt.Close()
	}
	c.stmts = nil
	return c.inner.Close()
}

// cacheable reports a single statement: multi-statement scripts (migrations) go
// straight to the driver, which runs all of them. A ';' inside a comment or a
// quoted string does not end a statement: the queries' doc comments hold some,
// and treating those as scripts re-parsed the hottest statements on every call.
func cacheable(q string) bool {
	ended, body := false, false
	for i := 0; i < len(q); i++ {
		switch c := q[i]; {
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			for i < len(q) && q[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			end := strings.Index(q[i+2:], "*/")
			if end < 0 {
				return false
			}
			i += end + 3
		case c == ';':
			ended = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		default:
			if ended {
				return false // a second statement follows
			}
			body = true
			if c == '\'' || c == '"' || c == '`' || c == '[' {
				closer := c
				if c == '[' {
					closer = ']'
				}
				end := strings.IndexByte(q[i+1:], closer)
				if end < 0 {
					return false
				}
				i += end + 1 // a doubled quote reads as two adjacent literals: same result
			}
		}
	}
	return body
}

// statement returns the cached prepared statement of q, or ok=false when q is not
// cacheable or its cached statement is in use.
func (c *cachingConn) statement(ctx context.Context, q string) (*cachedStmt, bool, error) {
	if s := c.stmts[q]; s != nil {
		c.lru.MoveToFront(s.at)
		return s, !s.busy, nil
	}
	if !cacheable(q) {
		return nil, false, nil
	}
	st, err := c.conn().PrepareContext(ctx, q)
	if err != nil {
		return nil, false, err
	}
	s := &cachedStmt{q: q, stmt: st}
	s.at = c.lru.PushFront(s)
	c.stmts[q] = s
	c.evict()
	return s, true, nil
}

// evict closes the least recently used statements past maxCachedStmts. One
// whose rows are open is kept until a later eviction finds it closed.
func (c *cachingConn) evict() {
	for e := c.lru.Back(); e != nil && len(c.stmts) > maxCachedStmts; {
		s, prev := e.Value.(*cachedStmt), e.Prev()
		if !s.busy {
			c.lru.Remove(e)
			delete(c.stmts, s.q)
			_ = s.stmt.Close()
		}
		e = prev
	}
}

func (c *cachingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	s, ok, err := c.statement(ctx, q)
	if err != nil {
		return nil, err
	}
	if !ok {
		return c.conn().ExecContext(ctx, q, args)
	}
	return s.stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (c *cachingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	s, ok, err := c.statement(ctx, q)
	if err != nil {
		return nil, err
	}
	if !ok {
		return c.conn().QueryContext(ctx, q, args)
	}
	rows, err := s.stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
	if err != nil {
		return nil, err
	}
	s.busy = true
	return &cachedRows{Rows: rows, s: s}, nil
}

// cachedRows frees its statement for reuse when closed.
type cachedRows struct {
	driver.Rows
	s *cachedStmt
}

func (r *cachedRows) Close() error {
	r.s.busy = false
	return r.Rows.Close()
}
