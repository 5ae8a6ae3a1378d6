// Package deflog is the logger Drover's parts use when given none: warnings
// and errors through slog.Default(), so a program that configured nothing sees
// them on stderr and one that called slog.SetDefault sees them where it sends
// its own. Drover logged nothing without a Logger, and a worker whose every
// claim failed (a database down, a server refusing its requests) said so to
// no one.
package deflog

import (
	"context"
	"log/slog"
)

// New returns a logger of the records at slog.LevelWarn and above, handled by
// slog.Default()'s handler as it is when each record is logged.
func New() *slog.Logger { return slog.New(handler{}) }

// handler passes records at Warn and above to the default handler current
// at the time, with the attributes and groups added by With and WithGroup.
type handler struct {
	ops []op
}

// op is one With (attrs) or WithGroup (group) call, replayed in order on the
// default handler.
type op struct {
	attrs []slog.Attr
	group string
}

func (h handler) target() slog.Handler {
	t := slog.Default().Handler()
	for _, o := range h.ops {
		if o.attrs != nil {
			t = t.WithAttrs(o.attrs)
		} else {
			t = t.WithGroup(o.group)
		}
	}
	return t
}

func (h handler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && slog.Default().Handler().Enabled(ctx, l)
}

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	return h.target().Handle(ctx, r)
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return handler{ops: append(h.ops[:len(h.ops):len(h.ops)], op{attrs: attrs})}
}

func (h handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return handler{ops: append(h.ops[:len(h.ops):len(h.ops)], op{group: name})}
}
