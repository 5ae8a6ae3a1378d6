package pgdriver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
)

// A caller's transaction on another database of the server, where another
// Drover installation uses a schema of the same name (say public in both), is
// refused naming tx, and left aborted. The check compared schemas only, so
// the insert succeeded, committed into the other database, and the driver's
// own workers never saw the job (helper-79). The SQLite driver refuses a tx
// on another file.
func TestInsertTxOnAnotherDatabaseRefused(t *testing.T) {
	ctx := context.Background()
	url := testdb.PostgresURL(t) // schema t_xxx in database test
	d := openURL(t, url)
	schema := url[strings.LastIndex(url, "search_path=")+len("search_path="):]
	if i := strings.IndexByte(schema, '&'); i >= 0 {
		schema = schema[:i]
	}
	admin := testdb.Connect(ctx, t)
	other := fmt.Sprintf("drover_other_%d", time.Now().UnixNano())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+other); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c := testdb.Connect(context.Background(), t)
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "DROP DATABASE "+other+" WITH (FORCE)")
	})
	otherURL := strings.Replace(url, "/test?", "/"+other+"?", 1)
	{
		base := strings.Replace(testdb.PostgresBaseURL(), "/test?", "/"+other+"?", 1)
		c, err := pgxpool.New(ctx, base)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	openURL(t, otherURL) // migrates the other installation
	pool, err := pgxpool.New(ctx, otherURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	res, err := d.JobInsertManyTx(ctx, tx, []driver.InsertParams{{Kind: "k", Queue: "q", Args: json.RawMessage(`{}`), MaxAttempts: 1}})
	if err == nil {
		_ = tx.Commit(ctx)
		_, gerr := d.JobGet(ctx, res[0].Job.ID)
		t.Fatalf("JobInsertManyTx on a tx of database %s answered job %d and no error; after the commit the driver's JobGet says: %v", other, res[0].Job.ID, gerr)
	}
	var ve *driver.ValidationError
	if !errors.As(err, &ve) || ve.Field != "tx" || !strings.Contains(err.Error(), "another database") {
		t.Errorf("JobInsertManyTx on a tx of database %s: %v; want a ValidationError on tx naming the other database", other, err)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Errorf("the refused transaction committed; want it aborted")
	}
}
