package blackbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/testdb"
)

// TestCLIThroughServerShowsTheSameJob: issue 2 pins that `-o json` prints the
// job objects the API does, and issue 3 that `jobs` commands with --server
// need no database. So `drover --server URL jobs show ID` must print what
// `drover --database-url DB jobs show ID` prints, table and JSON, and its JSON
// must be the API's job: a timeout of 1.001 s (1.000999999 s once through a
// float), a job without metadata, and a succeeded job whose result is JSON
// null are where a job decoded from the API could differ from the row.
func TestCLIThroughServerShowsTheSameJob(t *testing.T) {
	t.Parallel()
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, kind)
			c := s.client(t, "")
			q := "cli-same"
			future := c.enqueue(map[string]any{"kind": "echo", "queue": q + ".later", "timeout_seconds": 1.001,
				"run_at": "2100-01-01T00:00:00Z"}, 201)
			withMeta := c.enqueue(map[string]any{"kind": "echo", "queue": q + ".later", "metadata": map[string]any{"team": "payments"},
				"timeout_seconds": 0.3, "run_at": "2100-01-01T00:00:00Z"}, 201)
			nullResult := c.enqueue(map[string]any{"kind": "echo", "queue": q, "timeout_seconds": 2.005}, 201)
			tk := lcClaim(c, "w-cli", q, 0)
			c.want(200, "POST", "/internal/task-complete", with(fence(tk), "status", "succeeded"), nil) // no output: null
			failed := c.enqueue(map[string]any{"kind": "echo", "queue": q, "max_attempts": 1}, 201)
			tk = lcClaim(c, "w-cli", q, 0)
			c.want(200, "POST", "/internal/task-complete", with(fence(tk), "status", "failed", "error", "boom"), nil)

			for _, j := range []job{future, withMeta, nullResult, failed} {
				id := fmt.Sprint(j.ID)
				viaDB := runCLI(t, "--database-url", s.url, "jobs", "show", id)
				viaServer := runCLI(t, "--server", s.base, "jobs", "show", id)
				if normalizeShow(viaDB) != normalizeShow(viaServer) {
					t.Errorf("jobs show %s through the server:\n%s\nfrom the database:\n%s", id, viaServer, viaDB)
				}
				jsonDB := runCLI(t, "--database-url", s.url, "jobs", "show", id, "-o", "json")
				jsonServer := runCLI(t, "--server", s.base, "jobs", "show", id, "-o", "json")
				if !sameJSON(t, jsonDB, jsonServer) {
					t.Errorf("jobs show %s -o json through the server:\n%s\nfrom the database:\n%s", id, jsonServer, jsonDB)
				}
				api := c.do("GET", "/jobs/"+id, nil)
				var cli map[string]json.RawMessage
				if err := json.Unmarshal([]byte(jsonServer), &cli); err != nil {
					t.Fatalf("jobs show %s -o json: %v: %s", id, err, jsonServer)
				}
				delete(cli, "events")
				noEvents, _ := json.Marshal(cli)
				if !sameJSON(t, string(api.body), string(noEvents)) {
					t.Errorf("jobs show %s -o json through the server (without events):\n%s\nGET /jobs/%s:\n%s", id, noEvents, id, api.body)
				}
			}
		})
	}
}

// normalizeShow compacts the JSON values of `jobs show`'s args, metadata and
// result lines: PostgreSQL's jsonb prints {"a": 1} from the database where
// the API's answer has {"a":1}, a difference of spacing only.
func normalizeShow(out string) string {
	lines := strings.Split(out, "\n")
	for i, line := range lines {
		for _, f := range []string{"args:", "metadata:", "result:"} {
			v, ok := strings.CutPrefix(line, f)
			if !ok {
				continue
			}
			var b bytes.Buffer
			if json.Compact(&b, []byte(strings.TrimSpace(v))) == nil {
				lines[i] = f + " " + b.String()
			}
		}
	}
	return strings.Join(lines, "\n")
}

// runCLI runs the drover command and answers its standard output.
func runCLI(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, droverBin, args...)
	cmd.Env = cleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("drover %v: %v\n%s%s", args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal([]byte(a), &va); err != nil {
		t.Fatalf("not JSON: %v: %s", err, a)
	}
	if err := json.Unmarshal([]byte(b), &vb); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}
