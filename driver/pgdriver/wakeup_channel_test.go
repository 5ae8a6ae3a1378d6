package pgdriver_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/pgdriver"
	"github.com/drover-dev/drover/internal/testdb"
)

// TestLongSchemaNameWakeups: in a schema of the longest name PostgreSQL
// allows (63 bytes), a wake-up is delivered and an enqueue in the caller's
// transaction works. The channel, "drover_wakeup_" and the schema's name,
// was then over a channel's 63 bytes: pg_notify failed every such enqueue,
// and LISTEN cut the name, so no wake-up came (helper-18).
func TestLongSchemaNameWakeups(t *testing.T) {
	ctx := context.Background()
	conn := testdb.Connect(ctx, t)
	defer conn.Close(ctx)
	schema := "t_" + strings.Repeat("x", 61)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), testdb.PostgresBaseURL())
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			c.Close(context.Background())
		}
	})
	d := testdb.OpenURL(t, "postgres", testdb.WithSearchPath(testdb.PostgresBaseURL(), schema)).(*pgdriver.Driver)

	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sub, err := d.WakeupSubscribe(ctx)
	if err != nil {
		t.Fatalf("WakeupSubscribe: %v", err)
	}
	awaitWakeup(ctx, t, d, sub, "probe", "", true)
	tx, err := d.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := d.JobInsertManyTx(ctx, tx, []driver.InsertParams{{Kind: "k", Queue: "q", Args: json.RawMessage(`{}`), MaxAttempts: 3}}); err != nil {
		t.Fatalf("JobInsertManyTx: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	awaitWakeup(ctx, t, d, sub, "q", "", false)
}
