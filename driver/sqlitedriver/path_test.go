package sqlitedriver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
)

// A relative path names the file it named when Open ran. The pools open
// connections later: a reader when those open are busy, the writer again after
// database/sql dropped it, as it does when a call's context ends while it
// waits for another process's lock. Each opened the relative name against the
// working directory of its moment, so a process that had changed directory
// read and wrote a new empty file there (or another database of that name).
func TestRelativePathStaysTheFileOpenFound(t *testing.T) {
	ctx := context.Background()
	for _, path := range []string{"drover.db", "file:drover.db", "file:./drover.db?cache=private"} {
		t.Run(path, func(t *testing.T) {
			// A directory whose name a file: URI must escape.
			first := filepath.Join(t.TempDir(), "a %41#b?c")
			second := t.TempDir()
			if err := os.Mkdir(first, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Chdir(first)
			d, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if err := d.MigrateUp(ctx); err != nil {
				t.Fatal(err)
			}
			res, err := d.JobInsertMany(ctx, []driver.InsertParams{params("q")})
			if err != nil {
				t.Fatal(err)
			}
			id := res[0].Job.ID
			if _, err := os.Stat(filepath.Join(first, "drover.db")); err != nil {
				t.Fatalf("the file Open made: %v; want it in %s", err, first)
			}

			t.Chdir(second)
			// Another process holds the write lock past a claim's deadline:
			// database/sql drops the writer the claim interrupted.
			other, err := Open("file:"+uriName(filepath.Join(first, "drover.db")), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			tx, err := other.DB().BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			_, err = d.JobClaim(short, driver.ClaimParams{Queues: []string{"q"}, Owner: "w", LeaseDuration: time.Minute})
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("claim while another process holds the lock: %v; want its deadline", err)
			}
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			// Busy readers, so the next read opens a new one.
			for d.read.Stats().Idle > 0 {
				rows, err := d.read.QueryContext(ctx, "SELECT 1")
				if err != nil {
					t.Fatal(err)
				}
				defer func(rows *sql.Rows) { rows.Close() }(rows)
			}

			if _, err := d.JobGet(ctx, id); err != nil {
				t.Errorf("JobGet through a reader opened after the directory changed: %v; want the job", err)
			}
			js, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Owner: "w", LeaseDuration: time.Minute})
			if err != nil || len(js) != 1 || js[0].ID != id {
				t.Errorf("JobClaim through a writer opened after the directory changed: %v, %v; want job %d", js, err, id)
			}
			if _, err := os.Stat(filepath.Join(second, "drover.db")); err == nil {
				t.Errorf("a drover.db appeared in the directory changed to")
			}
		})
	}
}

// Open of a file whose directory does not exist says so, naming the path and
// the directory: SQLite says only "unable to open database file".
func TestOpenNamesTheMissingDirectory(t *testing.T) {
	t.Parallel()
	base := filepath.Join(t.TempDir(), "x #%41y") // a file: URI escapes two
	if err := os.Mkdir(base, 0o755); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(base, "nope")
	for _, path := range []string{
		filepath.Join(missing, "drover.db"),
		"file:" + uriName(filepath.Join(missing, "drover.db")) + "?cache=private",
	} {
		d, err := Open(path, Options{})
		if err == nil {
			d.Close()
			t.Fatalf("Open(%q) succeeded; want an error", path)
		}
		want := fmt.Sprintf("open sqlite %q: the directory %q does not exist", path, missing)
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q): %v\nwant it to say: %s", path, err, want)
		}
	}
	// A directory that exists is not reported missing.
	if d, err := Open(filepath.Join(base, "drover.db"), Options{}); err != nil {
		t.Errorf("Open in a directory that exists: %v", err)
	} else {
		d.Close()
	}
}
