package sqlitedriver

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// A file: URI with cache=shared is refused, naming it. In shared-cache mode
// the driver's readers and its writer share one cache, and SQLite's table
// locks replace WAL's snapshots between them: a read (JobGet, JobList,
// QueueList) waited for the whole of any write transaction, an EnqueueTx
// caller's included, and for ever when the goroutine holding that
// transaction read (JobGet after EnqueueTx, before the commit, never
// returned); with _pragma=read_uncommitted(1) as well, JobGet and QueueList
// answered a job of a transaction that then rolled back. A shared in-memory
// database (one connection: nothing to lock against) is still accepted.
func TestOpenRefusesSharedCache(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, q := range []string{"cache=shared", "cache=shared&_pragma=read_uncommitted(1)", "_txlock=immediate&cache=shared"} {
		uri := "file:" + filepath.Join(dir, "shared.db") + "?" + q
		d, err := Open(uri, Options{})
		if err == nil {
			d.Close()
			t.Errorf("Open(%q) succeeded; want it refused", uri)
			continue
		}
		if !strings.Contains(err.Error(), "cache=shared") || !strings.Contains(err.Error(), "remove it") {
			t.Errorf("Open(%q): %v; want an error naming cache=shared and saying to remove it", uri, err)
		}
	}
	uri := "file:" + filepath.Join(dir, "private.db") + "?cache=private"
	d, err := Open(uri, Options{})
	if err != nil {
		t.Fatalf("Open(%q): %v; want a private cache accepted", uri, err)
	}
	d.Close()

	mem := "file:drover_shared_cache_test?mode=memory&cache=shared"
	d, err = Open(mem, Options{})
	if err != nil {
		t.Fatalf("Open(%q): %v; want a shared in-memory database accepted", mem, err)
	}
	defer d.Close()
	if err := d.MigrateUp(context.Background()); err != nil {
		t.Fatal(err)
	}
}
