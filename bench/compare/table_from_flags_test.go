package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --table-from prints a table, whatever -o said: -o json with it printed the
// table, and -o xml was not checked at all. Both are refused, and nothing is
// printed.
func TestTableFromRefusesOutputJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.json")
	rep := report{Results: []result{{Workload: "burn-down", Param: "10 jobs", System: "drover", WorkPerSec: 5}}}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.writeJSON(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, c := range []struct {
		o, want string
	}{
		{"json", "--table-from prints the table of " + path + ", which is the JSON; -o json asks for JSON"},
		{"xml", `-o must be table or json, got "xml"`},
	} {
		out, err := captureStdout(t, func() error { return run([]string{"--table-from", path, "-o", c.o}) })
		if err == nil || !strings.Contains(err.Error(), c.want) || out != "" {
			t.Errorf("run --table-from -o %s = %v, printing %d bytes; want an error containing %q and nothing printed", c.o, err, len(out), c.want)
		}
	}
	if out, err := captureStdout(t, func() error { return run([]string{"--table-from", path}) }); err != nil || !strings.Contains(out, "burn-down 10 jobs") {
		t.Errorf("run --table-from = %v, printing\n%s\nwant the saved run's table", err, out)
	}
}
