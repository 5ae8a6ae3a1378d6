package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

func newJobsCmd(g *globals) *cobra.Command {
	cmd := group(&cobra.Command{Use: "jobs", Short: "Enqueue, list, show and cancel jobs"})
	cmd.AddCommand(newJobsEnqueueCmd(g), newJobsListCmd(g), newJobsShowCmd(g), newJobsCancelCmd(g))
	return cmd
}

func newJobsEnqueueCmd(g *globals) *cobra.Command {
	var (
		args, queue, runAt, key, metadata string
		priority, maxAttempts             int
		timeout                           time.Duration
	)
	cmd := &cobra.Command{
		Use:   "enqueue KIND",
		Short: "Enqueue one job",
		Example: `  drover jobs enqueue echo --args '{"hello":"world"}'
  drover jobs enqueue sleep --args '{"ms":500}' --queue slow --priority 1
  drover jobs enqueue email --run-at 2030-01-01T09:00:00Z --idempotency-key signup-42`,
		Args: exactArgs(1, "KIND"),
		RunE: func(cmd *cobra.Command, pos []string) error {
			f := cmd.Flags()
			opts := &drover.EnqueueOpts{Queue: queue, Priority: priority, MaxAttempts: maxAttempts,
				Timeout: timeout, IdempotencyKey: key}
			// A flag given explicitly must be valid; the library's zero-means-default
			// applies only to flags left out.
			if f.Changed("queue") && queue == "" {
				return driver.Invalid("queue", "must not be empty")
			}
			if f.Changed("max-attempts") && maxAttempts < 1 {
				return driver.Invalid("max_attempts", "%d, must be at least 1", maxAttempts)
			}
			if f.Changed("timeout") && timeout <= 0 {
				return driver.Invalid("timeout", "%s, must be positive (e.g. 30s)", timeout)
			}
			if f.Changed("args") && strings.TrimSpace(args) == "" {
				return driver.Invalid("args", "is empty, must be a JSON object (leave --args out for {})")
			}
			if f.Changed("metadata") && strings.TrimSpace(metadata) == "" {
				return driver.Invalid("metadata", "is empty, must be a JSON object (leave --metadata out for none)")
			}
			if f.Changed("idempotency-key") && key == "" {
				return driver.Invalid("idempotency_key", "must not be empty")
			}
			if f.Changed("run-at") { // "" too: --run-at "$WHEN" with WHEN unset must not run it now
				t, err := time.Parse(time.RFC3339Nano, runAt)
				if err != nil {
					return driver.Invalid("run_at", "%q is not an RFC 3339 time (e.g. 2030-01-01T09:00:00Z)", runAt)
				}
				if t.IsZero() { // the library's "not set": refused as the years around it are
					return driver.Invalid("run_at", "%s is out of range", t.Format(time.RFC3339))
				}
				opts.RunAt = t
			}
			var meta json.RawMessage
			if metadata != "" {
				meta = json.RawMessage(metadata)
				opts.Metadata = meta
			}
			// Checked here for both paths, so that bad input gets the same answer
			// (exit 2, the field named) with and without --server: a remote call
			// could not even encode malformed args. The size limit is the target's.
			ip := driver.InsertParams{Kind: pos[0], Queue: queue, Args: json.RawMessage(args), Metadata: meta,
				Priority: priority, MaxAttempts: maxAttempts, Timeout: timeout, IdempotencyKey: key}
			if !opts.RunAt.IsZero() {
				ip.RunAt = &opts.RunAt
			}
			if err := driver.ValidateInsert(&ip, driver.Limits{MaxPayloadBytes: math.MaxInt}); err != nil {
				return err
			}
			return g.withClient(cmd.Context(), func(c api) error {
				res, err := c.Enqueue(cmd.Context(), pos[0], ip.Args, opts)
				if err != nil {
					return err
				}
				if res.Existing {
					err = g.nothingNew(res.Job, "job %d exists already with idempotency key %q; nothing enqueued", res.Job.ID, key)
				} else {
					err = g.done(res.Job, "enqueued job %d", res.Job.ID)
				}
				if err != nil || g.output == "json" {
					return err // -o json: done printed the job
				}
				return g.printJobs([]*drover.Job{res.Job})
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&args, "args", "{}", "job arguments, a JSON object")
	f.StringVar(&queue, "queue", drover.DefaultQueue, "queue name")
	f.IntVar(&priority, "priority", 0, "priority; 0 is claimed first, never negative")
	f.StringVar(&runAt, "run-at", "", "earliest time to run, RFC 3339")
	f.IntVar(&maxAttempts, "max-attempts", drover.DefaultMaxAttempts, "executions before the job goes to the DLQ")
	f.DurationVar(&timeout, "timeout", 0, "handler timeout, e.g. 30s (default: the worker's)")
	f.StringVar(&key, "idempotency-key", "", "a second enqueue with the same key returns the first job")
	f.StringVar(&metadata, "metadata", "", "metadata, a JSON object")
	return cmd
}

func newJobsListCmd(g *globals) *cobra.Command {
	var status, queue, kind string
	var limit int
	var after int64
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List jobs, newest first",
		Args:  exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p := drover.ListParams{Queue: queue, Kind: kind, Limit: limit, AfterID: after}
			if err := checkNames(queue, kind); err != nil {
				return err
			}
			for _, s := range splitList(status) {
				st, err := lifecycle.ParseStatus(s)
				if err != nil {
					return driver.Invalid("status", "%v", err)
				}
				p.Statuses = append(p.Statuses, st)
			}
			if err := checkPage(limit, after); err != nil {
				return err
			}
			return g.withClient(cmd.Context(), func(c api) error {
				jobs, more, err := c.List(cmd.Context(), p)
				if err != nil {
					return err
				}
				if err := g.printJobs(jobs); err != nil {
					return err
				}
				g.morePages(jobs, more)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.Var(statusesFlag{&status}, "status", "only these statuses (comma-separated, or --status repeated)")
	f.StringVar(&queue, "queue", "", "only this queue")
	f.StringVar(&kind, "kind", "", "only this kind")
	f.IntVar(&limit, "limit", 100, "most jobs to show")
	f.Int64Var(&after, "after", 0, "show jobs older than this id (cursor)")
	once(cmd, "queue", "kind", "limit", "after")
	return cmd
}

// flagValue is a flag's value (pflag.Value).
type flagValue interface {
	String() string
	Set(string) error
	Type() string
}

// onceFlag refuses a flag given a second time, as the HTTP API refuses a
// query parameter given twice: the flag package keeps the last value without
// a word, so `jobs list --queue payments --queue refunds` listed the refunds
// alone, where GET /jobs?queue=payments&queue=refunds answers 400.
type onceFlag struct {
	flagValue
	given bool
}

func (o *onceFlag) Set(s string) error {
	if o.given {
		return errors.New("given more than once; give it once")
	}
	o.given = true
	return o.flagValue.Set(s)
}

// once makes each named flag of cmd refuse a second value (onceFlag).
func once(cmd *cobra.Command, names ...string) {
	for _, n := range names {
		fl := cmd.Flags().Lookup(n)
		fl.Value = &onceFlag{flagValue: fl.Value}
	}
}

// statusesFlag is --status: each value adds its statuses (comma-separated)
// to the filter, as a repeated ?status= does in the HTTP API; the flag
// package kept the last alone, so `--status failed --status canceled`
// listed the canceled jobs only.
type statusesFlag struct{ p *string }

func (s statusesFlag) String() string { return *s.p }
func (s statusesFlag) Type() string   { return "string" }
func (s statusesFlag) Set(v string) error {
	if *s.p != "" {
		v = *s.p + "," + v
	}
	*s.p = v
	return nil
}

func newJobsShowCmd(g *globals) *cobra.Command {
	return idCommand(g, "show ID", "Show a job with its error history and events",
		func(ctx context.Context, c api, id int64) error {
			j, err := c.Get(ctx, id)
			if err != nil {
				return err
			}
			evs, err := c.Events(ctx, id)
			if err != nil {
				return err
			}
			return g.printJob(j, evs)
		})
}

func newJobsCancelCmd(g *globals) *cobra.Command {
	return idCommand(g, "cancel ID", "Cancel a job that has not finished",
		func(ctx context.Context, c api, id int64) error {
			j, err := c.Cancel(ctx, id)
			if err != nil {
				return err
			}
			return g.done(j, "canceled job %d", j.ID)
		})
}

// idCommand is a command taking one job id: it parses the id, then runs fn with
// the database's or the server's API.
func idCommand(g *globals, use, short string, fn func(ctx context.Context, c api, id int64) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  exactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, pos []string) error {
			id, err := parseID(pos[0])
			if err != nil {
				return err
			}
			return g.withClient(cmd.Context(), func(c api) error { return fn(cmd.Context(), c, id) })
		},
	}
}

func parseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, driver.Invalid("id", "%q is not a job id (a positive integer)", s)
	}
	return id, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			if n == 0 {
				return fmt.Errorf("%w: %s takes no arguments, got %q", errUsage, cmd.CommandPath(), args)
			}
			if len(args) == 0 {
				return fmt.Errorf("%w: %s needs %s", errUsage, cmd.CommandPath(), names)
			}
			return fmt.Errorf("%w: %s takes %s only, got %d arguments %q", errUsage, cmd.CommandPath(), names, len(args), args)
		}
		return nil
	}
}
