package drivertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// diffJobs lists the fields that differ, comparing times as instants and JSON
// semantically. Replayed is not part of the row.
func diffJobs(a, b *driver.Job) string {
	fa, fb := jobFields(a), jobFields(b)
	keys := make([]string, 0, len(fa))
	for k := range fa {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var d []string
	for _, k := range keys {
		if fa[k] != fb[k] {
			d = append(d, fmt.Sprintf("%s: %s → %s", k, fa[k], fb[k]))
		}
	}
	return strings.Join(d, "; ")
}

func jobFields(j *driver.Job) map[string]string {
	errs := make([]string, len(j.Errors))
	for i, e := range j.Errors {
		errs[i] = fmt.Sprintf("{%d %s %q %q}", e.Attempt, fmtTime(e.At), e.Error, e.Stack)
	}
	return map[string]string{
		"id": fmt.Sprint(j.ID), "kind": j.Kind, "queue": j.Queue, "status": string(j.Status),
		"args": canonJSON(j.Args), "metadata": canonJSON(j.Metadata), "priority": fmt.Sprint(j.Priority),
		"run_at": fmtTime(j.RunAt), "attempt": fmt.Sprint(j.Attempt), "executions": fmt.Sprint(j.Executions),
		"max_attempts": fmt.Sprint(j.MaxAttempts), "timeout": j.Timeout.String(),
		"idempotency_key": j.IdempotencyKey, "owner": j.Owner, "lease_token": j.LeaseToken,
		"lease_expires_at": fmtTimePtr(j.LeaseExpiresAt), "result": canonJSON(j.Result), "error": j.Error,
		"errors": strings.Join(errs, ","), "created_at": fmtTime(j.CreatedAt), "started_at": fmtTimePtr(j.StartedAt),
		"finished_at": fmtTimePtr(j.FinishedAt), "rev": fmt.Sprint(j.Rev), "retry_of": fmtInt64Ptr(j.RetryOf),
		"workflow_run_id": fmtInt64Ptr(j.WorkflowRunID), "workflow_node": j.WorkflowNode,
	}
}

// canonJSON re-encodes raw so that equal JSON values give equal strings.
func canonJSON(raw json.RawMessage) string {
	if raw == nil {
		return "<nil>"
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return fmt.Sprintf("<invalid %q>", raw)
	}
	out, _ := json.Marshal(normNumbers(v))
	return string(out)
}

// normNumbers makes 1, 1.0 and 1e0 equal, as jsonb does.
func normNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	case []any:
		for i := range x {
			x[i] = normNumbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = normNumbers(x[k])
		}
	}
	return v
}

func jsonEqual(a, b json.RawMessage) bool { return canonJSON(a) == canonJSON(b) }

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return "<nil>"
	}
	return fmtTime(*t)
}

func fmtInt64Ptr(p *int64) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprint(*p)
}

func fmtEvent(e lifecycle.Event) string {
	s := fmt.Sprintf("{seq %d %s %s→%s attempt %d", e.Seq, e.Type, e.From, e.To, e.Attempt)
	if e.RequestID != "" {
		s += " req " + e.RequestID
	}
	return s + "}"
}

func fmtEvents(evs []lifecycle.Event) string {
	parts := make([]string, len(evs))
	for i, e := range evs {
		parts[i] = fmtEvent(e) + "@" + fmtTime(e.At)
	}
	return "[" + strings.Join(parts, " ") + "]"
}
