package cli

import (
	"context"
	"fmt"

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
				jobs, err := c.DLQList(cmd.Context(), queue, after, limit)
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
				g.morePages(jobs, limit)
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
	purge := &cobra.Command{
		Use:   "purge",
		Short: "Delete failed jobs",
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
			return g.withClient(cmd.Context(), func(c api) error {
				n, err := c.DLQPurge(cmd.Context(), purgeQueue)
				if err != nil {
					return err
				}
				return g.done(map[string]int{"purged": n}, "purged %d failed jobs", n)
			})
		},
	}
	purge.Flags().StringVar(&purgeQueue, "queue", "", "only this queue (default: all)")
	once(purge, "queue")
	cmd.AddCommand(list, requeue, purge)
	return cmd
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
