package pgdriver_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
)

// TestJobInsertManyTxRefusedSearchPathSaysTheTxIsAborted: a caller's
// transaction whose search_path reaches another installation's drover_jobs,
// or none, is refused as an invalid tx, and the refusal, a failed statement
// in that transaction, leaves it aborted as every failed statement does in
// PostgreSQL: its work cannot commit without the job it meant to enqueue.
// The error says so (it read as a refusal that changed nothing, and a caller
// that went on in the transaction got "current transaction is aborted"), and
// a search_path that reaches no drover_jobs at all is refused the same way
// instead of with PostgreSQL's "relation \"drover_jobs\" does not exist".
func TestJobInsertManyTxRefusedSearchPathSaysTheTxIsAborted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ours, theirs, empty := testdb.PostgresURL(t), testdb.PostgresURL(t), testdb.PostgresURL(t)
	d := openURL(t, ours)
	openURL(t, theirs)
	job := []driver.InsertParams{{Kind: "k", Queue: "q", Args: json.RawMessage(`{}`), MaxAttempts: 1}}
	for name, url := range map[string]string{"another installation's schema": theirs, "a schema without drover_jobs": empty} {
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.JobInsertManyTx(ctx, tx, job)
		if !errors.Is(err, driver.ErrInvalidArgument) || !strings.Contains(err.Error(), "search_path") ||
			!strings.Contains(err.Error(), "the transaction is aborted: roll it back") {
			t.Errorf("%s: JobInsertManyTx: %v; want an invalid tx naming search_path and saying the transaction is aborted", name, err)
		}
		var pgErr *pgconn.PgError
		if _, err := tx.Exec(ctx, "SELECT 1"); !errors.As(err, &pgErr) || pgErr.Code != "25P02" {
			t.Errorf("%s: a statement after the refusal: %v; want the transaction aborted (25P02), as the error says", name, err)
		}
		_ = tx.Rollback(ctx)
	}
}
