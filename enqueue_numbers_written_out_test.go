package drover_test

import (
	"context"
	"encoding/json"
	"testing"
)

// Args numbers with an exponent reach a handler alike on every driver:
// written out in full (1e2 → 100), as PostgreSQL's jsonb keeps them. SQLite
// kept the text as given, so a handler whose args type has an int field got
// its args on PostgreSQL and a decode error on SQLite, for the same enqueue
// (helper-79).
func TestEnqueueExponentNumbersDecodeAlike(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ctx := context.Background()
		for _, args := range []string{`{"n":1e2}`, `{"n":1.5e1}`, `{"n":2E+1}`} {
			res, err := c.Enqueue(ctx, "k", args, nil)
			if err != nil {
				t.Fatalf("%s: %v", args, err)
			}
			j, err := c.Get(ctx, res.Job.ID)
			if err != nil {
				t.Fatal(err)
			}
			var v struct{ N int }
			if err := json.Unmarshal(j.Args, &v); err != nil {
				t.Errorf("enqueued %s, stored %s: a handler's int field cannot decode it: %v", args, j.Args, err)
			}
		}
	})
}
