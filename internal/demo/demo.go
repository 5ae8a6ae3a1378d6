// Package demo holds the built-in job kinds that `drover dev`, `drover worker` and
// `drover bench` run, so a new user sees jobs flow without writing a handler.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/drover-dev/drover"
)

// SleepArgs are the args of the sleep kind.
type SleepArgs struct {
	MS int `json:"ms"`
}

// FailArgs are the args of the fail kind.
type FailArgs struct {
	Message string `json:"message"`
}

// Register adds the demo kinds: echo returns its args; sleep waits {"ms": N} (and
// stops early if canceled); fail always errors (so it ends in the DLQ after its
// attempts); noop does nothing (used by bench).
func Register(w *drover.Workers) {
	drover.Register(w, "echo", func(ctx context.Context, job *drover.Job, args json.RawMessage) (any, error) {
		return args, nil
	})
	drover.Register(w, "sleep", func(ctx context.Context, job *drover.Job, args SleepArgs) (any, error) {
		if args.MS < 0 {
			return nil, drover.Permanent(fmt.Errorf("sleep: ms is %d, must not be negative", args.MS))
		}
		t := time.NewTimer(time.Duration(args.MS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			return map[string]int{"slept_ms": args.MS}, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	})
	drover.Register(w, "fail", func(ctx context.Context, job *drover.Job, args FailArgs) (any, error) {
		msg := args.Message
		if msg == "" {
			msg = "the fail kind always fails"
		}
		return nil, errors.New(msg)
	})
	drover.Register(w, "noop", func(ctx context.Context, job *drover.Job, args struct{}) (any, error) {
		return nil, nil
	})
}
