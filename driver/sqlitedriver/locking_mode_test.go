package sqlitedriver

import (
	"path/filepath"
	"strings"
	"testing"
)

// A file: URI whose _pragma sets locking_mode to EXCLUSIVE is refused, naming
// it. The writer then keeps the file's lock for the life of its connection:
// every read through the driver's reader pool (JobGet, JobList, QueueList,
// MigrateStatus) failed with "database is locked" after busy_timeout's 10 s,
// and every other process's Open failed at once. NORMAL, SQLite's default,
// is accepted.
func TestOpenRefusesExclusiveLockingMode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, q := range []string{"_pragma=locking_mode(exclusive)", "_pragma=locking_mode%3DEXCLUSIVE", "_pragma=main.locking_mode('Exclusive')"} {
		uri := "file:" + filepath.Join(dir, "exclusive.db") + "?" + q
		d, err := Open(uri, Options{})
		if err == nil {
			d.Close()
			t.Errorf("Open(%q) succeeded; want it refused", uri)
			continue
		}
		if !strings.Contains(err.Error(), "_pragma=") || !strings.Contains(err.Error(), "locking_mode") || !strings.Contains(err.Error(), "remove it") {
			t.Errorf("Open(%q): %v; want an error naming _pragma locking_mode and saying to remove it", uri, err)
		}
	}
	uri := "file:" + filepath.Join(dir, "normal.db") + "?_pragma=locking_mode(NORMAL)"
	d, err := Open(uri, Options{})
	if err != nil {
		t.Fatalf("Open(%q): %v; want locking_mode NORMAL accepted", uri, err)
	}
	d.Close()
}
