package pgdriver_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/driver/pgdriver"
)

// The claims by id and the candidates of a claim over several queues read
// their timestamps as text, which pgx reads only in the ISO DateStyle. Under a
// database default of another style, a multi-queue claim failed and a claim by
// id committed and then failed to read its answer: its job sat running under
// nobody until the lease expired, and with max_attempts 1 went to the DLQ
// without running. The pools New opens ask for ISO; a URL or a caller's pool
// with another style is refused.
func TestDateStyleOtherThanISO(t *testing.T) {
	ctx := context.Background()
	sqlStyle := databaseWith(t, "DateStyle", "SQL, DMY", "DateStyle")

	d := openURL(t, sqlStyle)
	// Only the output style is asked for: the database's date order stays,
	// for the caller's own SQL on the pool.
	var style string
	if err := d.Pool().QueryRow(ctx, "SHOW DateStyle").Scan(&style); err != nil || style != "ISO, DMY" {
		t.Errorf("DateStyle of the driver's pool on a database of SQL, DMY = %q, %v; want ISO, DMY", style, err)
	}
	runAt := time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)
	ins, err := d.JobInsertMany(ctx, []driver.InsertParams{
		{Kind: "k", Queue: "a", Args: []byte(`{}`), MaxAttempts: 1, RunAt: &runAt},
		{Kind: "k", Queue: "b", Args: []byte(`{}`), MaxAttempts: 1, RunAt: &runAt},
	})
	if err != nil {
		t.Fatal(err)
	}
	byID, err := d.JobClaim(ctx, driver.ClaimParams{ID: ins[0].Job.ID, Owner: "w", LeaseDuration: time.Minute, Start: true})
	if err != nil || len(byID) != 1 || !byID[0].RunAt.Equal(runAt) {
		t.Fatalf("claim by id under a database DateStyle of SQL, DMY: %v, %v; want job %d with run_at %s", byID, err, ins[0].Job.ID, runAt)
	}
	multi, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"a", "b"}, Limit: 5, Owner: "w", LeaseDuration: time.Minute, Start: true})
	if err != nil || len(multi) != 1 || multi[0].ID != ins[1].Job.ID || !multi[0].RunAt.Equal(runAt) {
		t.Fatalf("claim over two queues under a database DateStyle of SQL, DMY: %v, %v; want job %d with run_at %s", multi, err, ins[1].Job.ID, runAt)
	}

	_, err = pgdriver.New(ctx, sqlStyle+"&datestyle=German", pgdriver.Options{})
	var ve *driver.ValidationError
	if !errors.As(err, &ve) || ve.Field != "database_url" || !strings.Contains(err.Error(), "ISO") {
		t.Errorf("New with datestyle=German in the URL: %v, want a ValidationError on database_url naming ISO", err)
	}
	if d, err := pgdriver.New(ctx, sqlStyle+"&datestyle=DMY,%20ISO", pgdriver.Options{}); err != nil {
		t.Errorf("New with datestyle=DMY, ISO in the URL: %v, want it taken", err)
	} else {
		_ = d.Close()
	}

	if _, err := pgdriver.NewFromPool(ctx, newPool(t, sqlStyle, nil), pgdriver.Options{}); !errors.Is(err, driver.ErrInvalidArgument) || !strings.Contains(err.Error(), "DateStyle") {
		t.Errorf("NewFromPool on a pool of DateStyle SQL, DMY: %v, want an ErrInvalidArgument naming DateStyle", err)
	}
}
