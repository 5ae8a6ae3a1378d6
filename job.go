package drover

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/lifecycle"
)

// Job is a job as stored. See driver.Job for the fields.
type Job = driver.Job

// JobStatus is a job's lifecycle status.
type JobStatus = lifecycle.Status

// The statuses of lifecycle, re-exported for convenience.
const (
	StatusPending   = lifecycle.StatusPending
	StatusQueued    = lifecycle.StatusQueued
	StatusClaimed   = lifecycle.StatusClaimed
	StatusRunning   = lifecycle.StatusRunning
	StatusWaiting   = lifecycle.StatusWaiting
	StatusPaused    = lifecycle.StatusPaused
	StatusStalled   = lifecycle.StatusStalled
	StatusSucceeded = lifecycle.StatusSucceeded
	StatusFailed    = lifecycle.StatusFailed
	StatusCanceled  = lifecycle.StatusCanceled
	StatusSkipped   = lifecycle.StatusSkipped
)

// Defaults applied when an option is left zero.
const (
	DefaultQueue       = "default"
	DefaultMaxAttempts = 25
)

// EnqueueOpts are the options of one job. Zero values mean the defaults.
type EnqueueOpts struct {
	Queue          string        // "": DefaultQueue
	Priority       int           // 0 (the default) is claimed first; never negative
	RunAt          time.Time     // zero: now
	MaxAttempts    int           // 0: DefaultMaxAttempts
	Timeout        time.Duration // 0: the worker's default; negative is an error
	IdempotencyKey string        // a second enqueue with the same key returns the first job
	Metadata       any           // a JSON object, stored with the job
}

// EnqueueParams is one job of EnqueueMany.
type EnqueueParams struct {
	Kind string
	Args any // a JSON object: a struct or a map (marshalled), or JSON text as json.RawMessage, []byte or string
	Opts *EnqueueOpts
}

// EnqueueResult is an enqueued job.
type EnqueueResult struct {
	Job      *Job
	Existing bool // the idempotency key was seen before: Job is the earlier job
}

// ListParams filters Client.List.
type ListParams = driver.ListParams

// QueueInfo is a queue with its counts per status.
type QueueInfo = driver.QueueInfo

func toJSON(field string, v any) (json.RawMessage, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return x, nil
	case []byte:
		return json.RawMessage(x), nil
	case string:
		return json.RawMessage(x), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, driver.Invalid(field, "cannot encode as JSON: %v", err)
	}
	return b, nil
}

func (c *Client) insertParams(p EnqueueParams) (driver.InsertParams, error) {
	o := p.Opts
	if o == nil {
		o = &EnqueueOpts{}
	}
	args, err := toJSON("args", p.Args)
	if err != nil {
		return driver.InsertParams{}, err
	}
	meta, err := toJSON("metadata", o.Metadata)
	if err != nil {
		return driver.InsertParams{}, err
	}
	ip := driver.InsertParams{
		Kind: p.Kind, Args: args, Queue: o.Queue, Priority: o.Priority, MaxAttempts: o.MaxAttempts,
		Timeout: o.Timeout, IdempotencyKey: o.IdempotencyKey, Metadata: meta, Actor: "client",
	}
	if ip.Queue == "" {
		ip.Queue = DefaultQueue
	}
	if o.MaxAttempts == 0 {
		ip.MaxAttempts = c.cfg.DefaultMaxAttempts
	}
	if !o.RunAt.IsZero() {
		t := o.RunAt.UTC()
		ip.RunAt = &t
	}
	if err := driver.ValidateInsert(&ip, driver.Limits{MaxPayloadBytes: c.cfg.MaxPayloadBytes}); err != nil {
		return driver.InsertParams{}, fmt.Errorf("enqueue %q: %w", p.Kind, err)
	}
	return ip, nil
}
