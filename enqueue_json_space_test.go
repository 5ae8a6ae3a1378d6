package drover_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/drover-dev/drover"
)

// Args or metadata with a Unicode space around the object (U+00A0, U+0085)
// are not JSON, and are refused naming the field on every driver. The check
// trimmed Unicode spaces (bytes.TrimSpace) and judged the rest, and the text
// as given was stored: invalid JSON in SQLite that no handler could decode,
// and on PostgreSQL a database error, not a ValidationError (helper-79).
func TestEnqueueRefusesUnicodeSpaceAroundJSON(t *testing.T) {
	forEachKind(t, func(t *testing.T, kind string) {
		c := newClient(t, kind, nil)
		ctx := context.Background()
		for _, tc := range []struct {
			name string
			p    drover.EnqueueParams
		}{
			{"args", drover.EnqueueParams{Kind: "k", Args: "\u00a0{\"a\":1}"}},
			{"metadata", drover.EnqueueParams{Kind: "k", Args: "{}", Opts: &drover.EnqueueOpts{Metadata: "{}\u0085"}}},
		} {
			res, err := c.EnqueueMany(ctx, []drover.EnqueueParams{tc.p})
			if err == nil {
				t.Errorf("%s: args %q%s accepted, want a ValidationError naming it", tc.name, tc.p.Args, metadataOf(tc.p))
			}
			if err != nil {
				var ve *drover.ValidationError
				if !errors.As(err, &ve) || ve.Field != tc.name || !errors.Is(err, drover.ErrInvalidArgument) {
					t.Errorf("%s: refused with an error that is no ValidationError naming the field: %v", tc.name, err)
				}
				continue
			}
			j, gerr := c.Get(ctx, res[0].Job.ID)
			if gerr != nil {
				t.Errorf("%s: accepted, Get: %v", tc.name, gerr)
				continue
			}
			if !json.Valid(j.Args) || (j.Metadata != nil && !json.Valid(j.Metadata)) {
				t.Errorf("%s: accepted and stored invalid JSON: args %q metadata %q", tc.name, j.Args, j.Metadata)
			}
		}
	})
}

func metadataOf(p drover.EnqueueParams) string {
	if p.Opts == nil {
		return ""
	}
	return fmt.Sprintf(" metadata %q", p.Opts.Metadata)
}
