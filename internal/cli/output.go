package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/lifecycle"
)

// compact spells a JSON value as the HTTP API does, without the spaces
// PostgreSQL's jsonb (or an enqueuer) put in it: `jobs show` printed {"ok": 1}
// on the database and {"ok":1} through a server.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

func (g *globals) json(v any) error {
	enc := json.NewEncoder(g.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func table(w io.Writer, header string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
}

// jobHeader's ATTEMPTS is the attempts used of max_attempts (executions,
// which max_attempts bounds), as the DLQ's table has it; a job's attempt, the
// claims it had, is in `jobs show`.
const jobHeader = "ID\tKIND\tQUEUE\tSTATUS\tATTEMPTS\tPRIORITY\tRUN_AT\tCREATED_AT"

func jobRow(j *drover.Job) []string {
	used := fmt.Sprintf("%d/%d", j.Executions, j.MaxAttempts)
	return []string{fmt.Sprint(j.ID), j.Kind, j.Queue, string(j.Status), used, fmt.Sprint(j.Priority),
		ts(&j.RunAt), ts(&j.CreatedAt)}
}

// morePages tells a person reading a table whose page has more after it how
// to see the next one, on stderr so that the table's lines stay the jobs';
// -o json, read by programs that page with --after, gets no hint. A page
// holds fewer than --limit jobs when they are large (localAPI), so a short
// page does not mean the last.
func (g *globals) morePages(jobs []*drover.Job, more bool) {
	if g.output == "json" || len(jobs) == 0 || !more {
		return
	}
	fmt.Fprintf(g.stderr, "(the first %d shown; there are more: --after %d)\n", len(jobs), jobs[len(jobs)-1].ID)
}

func (g *globals) printJobs(jobs []*drover.Job) error {
	if g.output == "json" {
		if jobs == nil {
			jobs = []*drover.Job{}
		}
		return g.json(jobs)
	}
	rows := make([][]string, len(jobs))
	for i, j := range jobs {
		rows[i] = jobRow(j)
	}
	table(g.stdout, jobHeader, rows)
	return nil
}

// printJob shows one job in detail, with its error history and events when given.
func (g *globals) printJob(j *drover.Job, events []lifecycle.Event) error {
	if g.output == "json" {
		if events == nil {
			return g.json(j)
		}
		// The job's own JSON (driver.Job has a MarshalJSON, which a struct
		// embedding it would inherit, dropping every other field) with the
		// events added as one more field.
		job, err := json.Marshal(j)
		if err != nil {
			return err
		}
		evs, err := json.Marshal(events)
		if err != nil {
			return err
		}
		obj := append(append(append(job[:len(job)-1:len(job)-1], `,"events":`...), evs...), '}')
		return g.json(json.RawMessage(obj))
	}
	w := g.stdout
	field := func(k, v string) { fmt.Fprintf(w, "%-16s %s\n", k+":", text(v, "\n"+strings.Repeat(" ", 17))) }
	field("id", fmt.Sprint(j.ID))
	field("kind", j.Kind)
	field("queue", j.Queue)
	field("status", string(j.Status))
	field("attempt", fmt.Sprintf("%d (executions %d of max %d)", j.Attempt, j.Executions, j.MaxAttempts))
	field("priority", fmt.Sprint(j.Priority))
	field("run_at", ts(&j.RunAt))
	field("args", compact(j.Args))
	if len(j.Metadata) > 0 {
		field("metadata", compact(j.Metadata))
	}
	if j.Result != nil {
		field("result", compact(j.Result))
	}
	if j.Error != "" {
		field("error", j.Error)
	}
	if j.IdempotencyKey != "" {
		field("idempotency_key", j.IdempotencyKey)
	}
	if j.Timeout > 0 {
		field("timeout", j.Timeout.String())
	}
	if j.RetryOf != nil {
		field("retry_of", fmt.Sprint(*j.RetryOf))
	}
	if j.Owner != "" {
		field("owner", j.Owner)
		field("lease_expires", ts(j.LeaseExpiresAt))
	}
	field("created_at", ts(&j.CreatedAt))
	field("started_at", ts(j.StartedAt))
	field("finished_at", ts(j.FinishedAt))
	field("rev", fmt.Sprint(j.Rev))
	if len(j.Errors) > 0 {
		fmt.Fprintln(w, "\nerrors:")
		for _, e := range j.Errors {
			fmt.Fprintf(w, "  attempt %d at %s: %s\n", e.Attempt, ts(&e.At), text(e.Error, "\n    "))
		}
	}
	if len(events) > 0 {
		fmt.Fprintln(w, "\nevents:")
		rows := make([][]string, len(events))
		for i, e := range events {
			from := string(e.From)
			if from == "" {
				from = "-"
			}
			rows[i] = []string{"  " + fmt.Sprint(e.Seq), ts(&e.At), string(e.Type), from + " → " + string(e.To),
				fmt.Sprint(e.Attempt), cell(e.Actor)}
		}
		table(w, "  SEQ\tAT\tTYPE\tTRANSITION\tATTEMPT\tACTOR", rows)
	}
	return nil
}

func ts(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// cell is text from a job (an error a worker reported) made fit for one cell
// of a table: every control character, newline and tab included, is written
// escaped as Go quotes it (\n, \t, \x1b), so that it cannot break the table's
// rows or columns, nor an escape sequence reach the reader's terminal, where
// it could recolour, clear or retitle it. -o json prints the text as stored.
func cell(s string) string { return text(s, "") }

// text is cell for the detail view of one job, where a newline in a long
// error is kept: it is written as newline, indented under its field. With
// newline "" it is escaped too.
func text(s, newline string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' && newline != "":
			b.WriteString(newline)
		case isControl(r):
			q := strconv.QuoteRune(r) // '\n', '\x1b', '\u009b'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isControl reports the C0 and C1 control characters and DEL.
func isControl(r rune) bool { return r < 0x20 || r >= 0x7f && r < 0xa0 }
