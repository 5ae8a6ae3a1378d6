package server

import (
	"context"
	"net/http"
	"testing"

	"github.com/drover-dev/drover/driver/sqlitedriver"
)

// SQLite has one write connection: a write transaction under way (a purge,
// a caller's JobInsertManyTx, the retention loop) holds it, and /healthz,
// which pinged through it, waited its 2 s out and answered 503 "unreachable"
// for a database that answers every read. An orchestrator's probe then
// restarts a healthy process.
func TestHealthDuringAWriteTransaction(t *testing.T) {
	s := newTestServer(t, Config{})
	sd, ok := s.drv.(*sqlitedriver.Driver)
	if !ok {
		t.Fatalf("driver %T, want SQLite", s.drv)
	}
	tx, err := sd.DB().BeginTx(context.Background(), nil) // holds the one write connection
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if code, _, body := call(t, s, "GET", "/healthz", "", nil); code != http.StatusOK {
		t.Errorf("GET /healthz while a write transaction is open: %d %s, want 200 (the database answers)", code, body)
	}
}
