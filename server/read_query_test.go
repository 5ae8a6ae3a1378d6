package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/internal/testdb"
)

// TestReadsRefuseQueryParameters: GET /queues, GET /jobs/{id} and GET
// /jobs/{id}/events take no query parameter, and refuse one (400 naming it),
// as GET /jobs refuses one it does not take: /queues?queue=payments answered
// every queue, as if it had filtered them, and /jobs/1/events?type=failed
// every event.
func TestReadsRefuseQueryParameters(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			s := newTestServerOn(t, kind, Config{})
			ctx := context.Background()
			for _, q := range []string{"payments", "refunds"} {
				if _, err := s.client.Enqueue(ctx, "charge", nil, &drover.EnqueueOpts{Queue: q}); err != nil {
					t.Fatal(err)
				}
				if err := s.client.PauseQueue(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			for _, tc := range []struct{ target, field string }{
				{"/queues?queue=payments", "queue"},
				{"/queues?paused=true", "paused"},
				{"/queues?name=refunds&name=payments", "name"},
				{"/queues?%zz", "query"},
				{"/jobs/1?fields=id", "fields"},
				{"/jobs/1/events?type=failed", "type"},
				{"/jobs/1/events?limit=1", "limit"},
			} {
				st, hdr, b := call(t, s, "GET", tc.target, "", nil)
				if st != http.StatusBadRequest {
					t.Errorf("GET %s = %d %.200s, want 400 naming %s", tc.target, st, b, tc.field)
					continue
				}
				checkErrorBody(t, st, hdr, b)
				var e errorBody
				_ = json.Unmarshal(b, &e)
				if !strings.Contains(e.Error.Message, tc.field) {
					t.Errorf("GET %s: message %q does not name %s", tc.target, e.Error.Message, tc.field)
				}
			}
			for _, target := range []string{"/queues", "/jobs/1", "/jobs/1/events"} {
				if st, _, b := call(t, s, "GET", target, "", nil); st != http.StatusOK {
					t.Errorf("GET %s = %d %s, want 200", target, st, b)
				}
			}
		})
	}
}
