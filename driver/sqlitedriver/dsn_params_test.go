package sqlitedriver

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
)

// A file: URI's parameter that sets one of the driver's own connection
// settings to another value is refused, naming it: the driver reads a repeated
// parameter's first value, so the caller's replaced the driver's without a
// word (with _txlock=deferred two processes' claims failed at once with
// "database is locked"; with _synchronous=OFF a power cut lost committed jobs).
// The driver's own values, spelled any way, are accepted and take effect.
func TestOpenRefusesURIParamsThatUndoTheDriversSettings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, q := range []string{
		"_txlock=deferred",
		"_txlock=exclusive",
		"_busy_timeout=0",
		"_timeout=100",
		"_journal_mode=DELETE",
		"_journal=MEMORY",
		"_synchronous=OFF",
		"_sync=NORMAL",
		"_foreign_keys=off",
		"_fk=0",
		"_query_only=on",
		"_pragma=busy_timeout(5)",
		"_pragma=journal_mode%3Ddelete",
		"_pragma=main.synchronous(0)",
		"_pragma=query_only(1)",
	} {
		uri := "file:" + filepath.Join(dir, "refused.db") + "?" + q
		d, err := Open(uri, Options{})
		if err == nil {
			d.Close()
			t.Errorf("Open(%q) succeeded; want it refused", uri)
			continue
		}
		key, _, _ := strings.Cut(q, "=")
		if !strings.Contains(err.Error(), key+"=") || !strings.Contains(err.Error(), "remove it") {
			t.Errorf("Open(%q): %v; want an error naming %s and saying to remove it", uri, err, key)
		}
	}

	ctx := context.Background()
	uri := "file:" + filepath.Join(dir, "same.db") +
		"?cache=private&_txlock=IMMEDIATE&_busy_timeout=10000&_journal_mode=wal&_synchronous=2&_fk=true&_pragma=journal_mode(WAL)"
	d, err := Open(uri, Options{})
	if err != nil {
		t.Fatalf("Open(%q) with the driver's own values: %v", uri, err)
	}
	defer d.Close()
	if err := d.MigrateUp(ctx); err != nil {
		t.Fatal(err)
	}
	for pragma, want := range map[string]string{"journal_mode": "wal", "synchronous": "2", "busy_timeout": "10000", "foreign_keys": "1"} {
		var got string
		if err := d.write.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil || got != want {
			t.Errorf("PRAGMA %s = %q, %v; want %q", pragma, got, err, want)
		}
	}
	if _, err := d.JobInsertMany(ctx, []driver.InsertParams{params("q")}); err != nil {
		t.Fatal(err)
	}
	if js, err := d.JobClaim(ctx, driver.ClaimParams{Queues: []string{"q"}, Owner: "w", LeaseDuration: time.Minute}); err != nil || len(js) != 1 {
		t.Fatalf("claim: %v, %v; want one job", js, err)
	}
}

// A file: URI that turns SQLite's locking off is refused: with nolock=1 the
// file also stayed out of WAL without a word, and three drivers on one file
// claiming 300 jobs one at a time claimed 127 of them twice and found the
// file "malformed". A file that cannot be switched to WAL at all (a VFS
// without shared memory) is refused as well, saying so.
func TestOpenRefusesAFileWithoutLocksOrWAL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct{ query, says string }{
		{"nolock=1", "nolock=1 turns SQLite's locking off"},
		{"nolock=TRUE", "nolock=TRUE turns SQLite's locking off"},
		{"immutable=yes", "immutable=yes turns SQLite's locking off"},
		{"vfs=unix-none", "could not be switched to WAL (journal_mode is delete)"},
	} {
		uri := "file:" + filepath.Join(dir, "nolock.db") + "?" + c.query
		d, err := Open(uri, Options{})
		if err == nil {
			d.Close()
			t.Errorf("Open(%q) succeeded; want it refused", uri)
			continue
		}
		if !strings.Contains(err.Error(), c.says) {
			t.Errorf("Open(%q): %v; want it to say %q", uri, err, c.says)
		}
	}
	uri := "file:" + filepath.Join(dir, "locked.db") + "?nolock=0&immutable=off"
	d, err := Open(uri, Options{})
	if err != nil {
		t.Fatalf("Open(%q): %v; want locking left on accepted", uri, err)
	}
	d.Close()
}
