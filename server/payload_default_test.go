package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/internal/testdb"
)

// A server's MaxPayloadBytes of 0 or less is its client's: a server left at
// the 1 MiB default refused, as too large, the 1.5 MiB result of a job whose
// client took 2 MiB payloads, and a negative one refused every result.
func TestServerMaxPayloadBytesIsTheClientsByDefault(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, -1} {
		c, err := drover.NewClient(testdb.Open(t, "sqlite"), &drover.Config{MaxPayloadBytes: 2 << 20})
		if err != nil {
			t.Fatal(err)
		}
		s := New(c, Config{MaxPayloadBytes: n})
		t.Cleanup(s.Close)
		if _, err := c.Enqueue(context.Background(), "report", map[string]int{"n": 1}, nil); err != nil {
			t.Fatal(err)
		}
		code, _, body := call(t, s, "POST", "/internal/task-claim", "", []byte(`{"worker_id":"w","queues":["default"]}`))
		var a struct {
			Tasks []struct {
				TaskID     int64  `json:"task_id"`
				Attempt    int    `json:"attempt"`
				LeaseToken string `json:"lease_token"`
			} `json:"tasks"`
		}
		if code != http.StatusOK || json.Unmarshal(body, &a) != nil || len(a.Tasks) != 1 {
			t.Fatalf("MaxPayloadBytes %d: task-claim %d %s, want one task", n, code, body)
		}
		tk := a.Tasks[0]
		output := `"` + strings.Repeat("x", 3<<19) + `"` // 1.5 MiB
		complete := fmt.Sprintf(`{"task_id":%d,"attempt":%d,"lease_token":%q,"status":"succeeded","output":%s}`, tk.TaskID, tk.Attempt, tk.LeaseToken, output)
		if code, _, body := call(t, s, "POST", "/internal/task-complete", "", []byte(complete)); code != http.StatusOK {
			t.Errorf("MaxPayloadBytes %d, client's 2 MiB: a 1.5 MiB output answered %d %.200s, want 200", n, code, body)
		}
	}
}
