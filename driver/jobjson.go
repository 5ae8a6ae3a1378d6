package driver

import (
	"bytes"
	"encoding/json"
	"math"
	"time"

	"github.com/drover-dev/drover/lifecycle"
)

func statusOf(s string) lifecycle.Status { return lifecycle.Status(s) }

// jobJSON is the wire shape of a job, shared by the CLI's -o json and the HTTP API.
// Every listed field is always present; absent values are null. The lease token is
// never shown: only the holder may know it.
type jobJSON struct {
	ID             int64           `json:"id"`
	Kind           string          `json:"kind"`
	Queue          string          `json:"queue"`
	Status         string          `json:"status"`
	Attempt        int             `json:"attempt"`
	Executions     int             `json:"executions"`
	MaxAttempts    int             `json:"max_attempts"`
	Priority       int             `json:"priority"`
	RunAt          time.Time       `json:"run_at"`
	Args           json.RawMessage `json:"args"`
	Metadata       json.RawMessage `json:"metadata"`
	Result         json.RawMessage `json:"result"`
	Error          *string         `json:"error"`
	Errors         []AttemptError  `json:"errors"`
	IdempotencyKey *string         `json:"idempotency_key"`
	TimeoutSeconds *float64        `json:"timeout_seconds"`
	Owner          *string         `json:"owner"`
	LeaseExpiresAt *time.Time      `json:"lease_expires_at"`
	CreatedAt      time.Time       `json:"created_at"`
	StartedAt      *time.Time      `json:"started_at"`
	FinishedAt     *time.Time      `json:"finished_at"`
	Rev            int64           `json:"rev"`
	RetryOf        *int64          `json:"retry_of"`
	WorkflowRunID  *int64          `json:"workflow_run_id"`
	WorkflowNode   *string         `json:"workflow_node"`
}

// MarshalJSON writes the job's wire shape.
func (j *Job) MarshalJSON() ([]byte, error) {
	w := jobJSON{
		ID: j.ID, Kind: j.Kind, Queue: j.Queue, Status: string(j.Status), Attempt: j.Attempt,
		Executions: j.Executions, MaxAttempts: j.MaxAttempts, Priority: j.Priority, RunAt: j.RunAt,
		Args: j.Args, Metadata: j.Metadata, Result: j.Result, Errors: j.Errors,
		LeaseExpiresAt: j.LeaseExpiresAt, CreatedAt: j.CreatedAt, StartedAt: j.StartedAt,
		FinishedAt: j.FinishedAt, Rev: j.Rev, RetryOf: j.RetryOf, WorkflowRunID: j.WorkflowRunID,
		Error: strPtr(j.Error), IdempotencyKey: strPtr(j.IdempotencyKey), Owner: strPtr(j.Owner),
		WorkflowNode: strPtr(j.WorkflowNode),
	}
	if w.Args == nil {
		w.Args = json.RawMessage("{}")
	}
	if w.Errors == nil {
		w.Errors = []AttemptError{}
	}
	if j.Timeout > 0 {
		s := TimeoutSeconds(j.Timeout)
		w.TimeoutSeconds = &s
	}
	// Without HTML's escapes: json.Marshal wrote every <, > and & of the args,
	// metadata and texts as \u003c (six bytes for one), whatever the caller's
	// encoder was set to, and a listing bounded by its jobs' bytes
	// (ListParams.MaxBytes) came out up to six times its bound (helper-90).
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// TimeoutSeconds is a timeout as the wire shape writes it: seconds, the
// nearest number to its whole milliseconds (the resolution), so that 1118 ms
// is written 1.118. Duration.Seconds adds the fraction in binary and wrote
// 1.1179999999999999.
func TimeoutSeconds(d time.Duration) float64 {
	if d%time.Millisecond != 0 {
		return d.Seconds()
	}
	return float64(d.Milliseconds()) / 1000
}

// UnmarshalJSON reads the wire shape back (for clients of the HTTP API).
func (j *Job) UnmarshalJSON(b []byte) error {
	var w jobJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*j = Job{
		ID: w.ID, Kind: w.Kind, Queue: w.Queue, Attempt: w.Attempt, Executions: w.Executions,
		MaxAttempts: w.MaxAttempts, Priority: w.Priority, RunAt: w.RunAt, Args: w.Args,
		Errors: w.Errors, LeaseExpiresAt: w.LeaseExpiresAt, CreatedAt: w.CreatedAt, StartedAt: w.StartedAt,
		FinishedAt: w.FinishedAt, Rev: w.Rev, RetryOf: w.RetryOf, WorkflowRunID: w.WorkflowRunID,
	}
	j.Status = statusOf(w.Status)
	// null is how the wire shape writes both "none" and a JSON null: the row
	// has no metadata, and a result on succeeded only, where a handler's null
	// is its result (as the drivers store it).
	if isJSONValue(w.Metadata) {
		j.Metadata = w.Metadata
	}
	switch {
	case isJSONValue(w.Result):
		j.Result = w.Result
	case j.Status == lifecycle.StatusSucceeded:
		j.Result = json.RawMessage("null")
	}
	j.Error, j.IdempotencyKey, j.Owner, j.WorkflowNode = deref(w.Error), deref(w.IdempotencyKey), deref(w.Owner), deref(w.WorkflowNode)
	if w.TimeoutSeconds != nil {
		// A timeout is whole milliseconds (Validate); its seconds as a float
		// times 1e9 can fall a nanosecond short (1.001 s → 1.000999999 s).
		j.Timeout = time.Duration(math.Round(*w.TimeoutSeconds*1000)) * time.Millisecond
	}
	return nil
}

// isJSONValue reports whether raw holds a JSON value other than null.
func isJSONValue(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
