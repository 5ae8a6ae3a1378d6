package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// checkNames refuses a --queue or --kind filter that is not a valid name, as
// the HTTP API does: a typo would otherwise list nothing, and succeed.
func checkNames(queue, kind string) error {
	if queue != "" {
		if err := driver.ValidateName("queue", queue); err != nil {
			return err
		}
	}
	if kind != "" {
		if err := driver.ValidateName("kind", kind); err != nil {
			return err
		}
	}
	return nil
}

// checkPage refuses paging flags the HTTP API would refuse too, so a command
// answers alike with and without --server.
func checkPage(limit int, after int64) error {
	if limit < 1 || limit > 1000 {
		return driver.Invalid("limit", "%d, must be 1 to 1000", limit)
	}
	if after < 0 {
		return driver.Invalid("after", "%d, must be a job id (or 0 for the newest)", after)
	}
	return nil
}

func newDLQCmd(g *globals) *cobra.Command {
	cmd := group(&cobra.Command{Use: "dlq", Short: "The dead-letter queue: failed jobs with their error history"})
	var queue string
	var limit int
	var after int64
	list := &cobra.Command{
		Use:   "list",
		Short: "List failed jobs",
		Args:  exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkPage(limit, after); err != nil {
				return err
			}
			if err := checkNames(queue, ""); err != nil {
				return err
			}
			return g.withClient(cmd.Context(), func(c api) error {
				jobs, more, err := c.DLQList(cmd.Context(), queue, after, limit)
				if err != nil {
					return err
				}
				if g.output == "json" {
					return g.printJobs(jobs)
				}
				rows := make([][]string, len(jobs))
				for i, j := range jobs {
					rows[i] = []string{fmt.Sprint(j.ID), j.Kind, j.Queue, fmt.Sprintf("%d/%d", j.Executions, j.MaxAttempts),
						ts(j.FinishedAt), truncate(cell(j.Error), 60)}
				}
				table(g.stdout, "ID\tKIND\tQUEUE\tATTEMPTS\tFAILED_AT\tERROR", rows)
				g.morePages(jobs, more)
				return nil
			})
		},
	}
	list.Flags().StringVar(&queue, "queue", "", "only this queue")
	list.Flags().IntVar(&limit, "limit", 100, "most jobs to show")
	list.Flags().Int64Var(&after, "after", 0, "show jobs older than this id (cursor)")
	once(list, "queue", "limit", "after")

	requeue := idCommand(g, "requeue ID", "Enqueue a failed job again as a new job (retry_of points at the old one); once per failed job",
		func(ctx context.Context, c api, id int64) error {
			j, err := c.DLQRequeue(ctx, id)
			if err != nil {
				return err
			}
			if j.Replayed && j.Status == lifecycle.StatusFailed {
				return g.nothingNew(j, "failed job %d was requeued before, as job %d, which failed too; nothing new was enqueued (to run it again: drover dlq requeue %d)", id, j.ID, j.ID)
			}
			if j.Replayed {
				return g.nothingNew(j, "failed job %d was requeued before, as job %d (now %s); nothing new was enqueued", id, j.ID, j.Status)
			}
			return g.done(j, "requeued failed job %d as job %d", id, j.ID)
		})
	var purgeQueue string
	var yes bool
	purge := &cobra.Command{
		Use:   "purge",
		Short: "Delete failed jobs with their error history (asks first on a terminal, unless --yes)",
		Args:  exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkNames(purgeQueue, ""); err != nil {
				return err
			}
			if cmd.Flags().Changed("queue") && purgeQueue == "" {
				// --queue "$Q" with Q unset must not purge every queue, as
				// DELETE /dlq?queue= does not.
				return driver.ValidateName("queue", purgeQueue)
			}
			if !yes {
				if err := g.confirmPurge(purgeQueue); err != nil {
					return err
				}
			}
			return g.withClient(cmd.Context(), func(c api) error {
				n, err := c.DLQPurge(cmd.Context(), purgeQueue)
				if err != nil && n > 0 {
					// SQLite purges in batches, and those that committed
					// stay purged: the error alone hid that they were gone.
					return fmt.Errorf("%w; %d failed jobs were purged before the error, the rest were not", err, n)
				}
				if err != nil {
					return err
				}
				return g.done(map[string]int{"purged": n}, "purged %d failed jobs", n)
			})
		},
	}
	purge.Flags().StringVar(&purgeQueue, "queue", "", "only this queue (default: all)")
	purge.Flags().BoolVarP(&yes, "yes", "y", false, "purge without asking (a command whose stdin is not a terminal never asks)")
	once(purge, "queue")
	cmd.AddCommand(list, requeue, purge)
	return cmd
}

// confirmPurge asks a person at a terminal before a purge, which deletes the
// failed jobs, the DLQ's only record of what went wrong, for good; by default
// of every queue, and a command line recalled from the shell's history runs
// it again without a word. As Temporal's CLI does for its batch commands, but
// a script (stdin not a terminal: a pipe, a file, /dev/null) is not asked, so
// scripts written before the question keep working.
func (g *globals) confirmPurge(queue string) error {
	if g.stdin == nil || !isTerminal(g.stdin) {
		return nil
	}
	what := "every queue's failed jobs"
	if queue != "" {
		what = fmt.Sprintf("the failed jobs of queue %q", queue)
	}
	fmt.Fprintf(g.stderr, "Delete %s, with their error history? This cannot be undone. [y/N] ", what)
	line, err := bufio.NewReader(g.stdin).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(g.stderr)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return errors.New("nothing purged: not confirmed (--yes purges without asking)")
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
