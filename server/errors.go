package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/drover-dev/drover/driver"
)

// Error codes of the API.
const (
	CodeInvalidArgument   = "invalid_argument"
	CodeUnauthorized      = "unauthorized"
	CodeForbidden         = "forbidden"
	CodeNotFound          = "not_found"
	CodeMethodNotAllowed  = "method_not_allowed"
	CodeLeaseLost         = "lease_lost"
	CodeConflict          = "conflict"
	CodePayloadTooLarge   = "payload_too_large"
	CodeInvalidTransition = "invalid_transition"
	CodeUnavailable       = "unavailable"
	CodeInternal          = "internal"
)

// apiError is an error with its HTTP status and code.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.message }

func badRequest(format string, a ...any) error {
	return &apiError{http.StatusBadRequest, CodeInvalidArgument, fmt.Sprintf(format, a...)}
}

// errorBody is the JSON shape of every error.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// classify maps an error to its status and code. Unknown errors are internal and
// their text is not shown (it may hold database details).
func classify(err error) *apiError {
	var ae *apiError
	var ve *driver.ValidationError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &mbe):
		return &apiError{http.StatusRequestEntityTooLarge, CodePayloadTooLarge,
			fmt.Sprintf("request body is larger than %d bytes", mbe.Limit)}
	case errors.As(err, &ve) && ve.TooLarge:
		return &apiError{http.StatusRequestEntityTooLarge, CodePayloadTooLarge, ve.Error()}
	case errors.As(err, &ve) && ve.Conflict:
		// A request_id another call used: no repeat of that call, and not
		// applied (driver.ErrRequestReused).
		return &apiError{http.StatusConflict, CodeConflict, ve.Error()}
	case errors.As(err, &ve):
		return &apiError{http.StatusBadRequest, CodeInvalidArgument, ve.Error()}
	case errors.Is(err, driver.ErrNotFound):
		return &apiError{http.StatusNotFound, CodeNotFound, err.Error()}
	case errors.Is(err, driver.ErrLeaseLost):
		return &apiError{http.StatusConflict, CodeLeaseLost, err.Error()}
	case errors.Is(err, driver.ErrInvalidTransition):
		return &apiError{http.StatusUnprocessableEntity, CodeInvalidTransition, err.Error()}
	case errors.Is(err, context.DeadlineExceeded):
		return &apiError{http.StatusServiceUnavailable, CodeUnavailable, "the database did not answer in time"}
	case unavailable(err):
		return &apiError{http.StatusServiceUnavailable, CodeUnavailable, "the database is unavailable; retry"}
	}
	return &apiError{http.StatusInternalServerError, CodeInternal, "internal error"}
}

// partialError is an error after part of a call's work was done and kept:
// its answer is err's, its message saying what was done.
type partialError struct {
	err  error
	done string
}

func (e *partialError) Error() string { return fmt.Sprintf("%v (%s)", e.err, e.done) }
func (e *partialError) Unwrap() error { return e.err }

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		return // the client went away; nobody reads an answer, and it is not our fault
	}
	ae := classify(err)
	if pe, ok := errors.AsType[*partialError](err); ok {
		said := *ae // classify may answer a shared one
		said.message += "; " + pe.done
		ae = &said
	}
	if ae.status >= 500 {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if re, ok := errors.AsType[*driver.RefusedError](err); ok && (ae.code == CodeLeaseLost || ae.code == CodeInvalidTransition) {
		// The job's state, which the message says for people, for a program
		// (a remote worker tells a cancel during its attempt from a lost
		// lease by them), in headers: the body stays {"error": {"code",
		// "message"}}.
		w.Header().Set(JobStatusHeader, string(re.Now))
		w.Header().Set(JobAttemptHeader, strconv.Itoa(re.Attempt))
	}
	var body errorBody
	body.Error.Code, body.Error.Message = ae.code, ae.message
	writeJSON(w, ae.status, body)
}

// JobStatusHeader and JobAttemptHeader are, on a 409 lease_lost or a 422
// the job's state refused, the job's status and attempt then.
const (
	JobStatusHeader  = "Drover-Job-Status"
	JobAttemptHeader = "Drover-Job-Attempt"
)

// replayedHeader marks an answer to a repeated request (a request_id or an
// idempotency key seen before), as Stripe's API does: the body is the job as
// it is now, and nothing was done again.
const replayedHeader = "Idempotent-Replayed"

// markReplayed sets replayedHeader when replayed; call it before writeJSON.
func markReplayed(w http.ResponseWriter, replayed bool) {
	if replayed {
		w.Header().Set(replayedHeader, "true")
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// decode reads one JSON object into v, strictly: unknown fields, trailing data,
// wrong types and malformed JSON are 400s that name what was wrong. The body is
// JSON whatever the Content-Type says, so `curl -d '{…}'` works as typed.
func decode(r *http.Request, v any) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	return decodeBytes(body, v)
}

// readBody reads the request's body: a body over the server's limit keeps its
// *http.MaxBytesError (a 413), any other failure is a 400.
func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		return nil, badRequest("reading the request body: %s", bodyReadError(err))
	}
	return body, nil
}

// bodyReadError says why a body could not be read without the connection's
// addresses, which a *net.OpError prints.
func bodyReadError(err error) string {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return "it did not arrive in full within the server's read timeout"
	}
	if oe, ok := errors.AsType[*net.OpError](err); ok && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}

// decodeOptional is decode for an endpoint whose body is optional: an empty
// body (or only whitespace) leaves v as it is. An endpoint that takes no
// fields passes &struct{}{}: anything but {} is then refused, rather than
// ignored (a request_id sent to one that takes none was silently dropped).
func decodeOptional(r *http.Request, v any) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	return decodeBytes(body, v)
}

// decodeBytes is decode of a body already read.
func decodeBytes(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, v)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return badRequest("request body has data after the JSON object")
	}
	return exactNames(body, v)
}

// exactNames refuses a field whose name matches one of v's only when case is
// ignored, as encoding/json does: {"KIND": …} would be taken as kind, and a
// second spelling of a name would silently win over the first. It refuses a
// field named twice too, which encoding/json reads as its last value while a
// proxy or validator in front may read the first.
func exactNames(body []byte, v any) error {
	if string(bytes.TrimSpace(body)) == "null" {
		return nil // no fields, as encoding/json reads it (and did before)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return badRequest("request body must be a JSON object")
	}
	names := fieldNames(reflect.TypeOf(v))
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		name, ok := t.(string)
		var value json.RawMessage
		if err != nil || !ok || dec.Decode(&value) != nil {
			return badRequest("request body must be a JSON object")
		}
		if seen[name] {
			return badRequest("field %q appears twice; send each field once", name)
		}
		seen[name] = true
		if names[name] {
			if err := exactText(name, value); err != nil {
				return err
			}
			continue
		}
		for known := range names {
			if strings.EqualFold(known, name) {
				return badRequest("unknown field %q (field names are case-sensitive: %q)", name, known)
			}
		}
		return badRequest("unknown field %q", name)
	}
	return nil
}

// identifierFields are the fields whose text names something (a job's key, a
// call, a worker) and is compared as sent.
var identifierFields = map[string]bool{"idempotency_key": true, "request_id": true, "worker_id": true}

// exactText refuses an identifier whose JSON string is not exactly UTF-8
// text: encoding/json replaces a lone surrogate escape (\ud83d, half an
// emoji cut short) and each byte that is not UTF-8 with U+FFFD, so two keys
// the client sent as different were one, and the second enqueue was answered
// with the first one's job (its own never enqueued). Free text (error,
// stack) is still taken, cleaned.
func exactText(name string, value json.RawMessage) error {
	if !identifierFields[name] || len(value) == 0 || value[0] != '"' {
		return nil
	}
	return driver.CheckJSON(name, value)
}

// fieldNames are the JSON names of the fields of the struct t points to,
// embedded structs' included.
func fieldNames(t reflect.Type) map[string]bool {
	if cached, ok := fieldNamesCache.Load(t); ok {
		return cached.(map[string]bool)
	}
	names := map[string]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		for i := range t.NumField() {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case tag == "-":
			case f.Anonymous && tag == "":
				walk(f.Type)
			case tag != "":
				names[tag] = true
			case f.IsExported():
				names[f.Name] = true
			}
		}
	}
	walk(t)
	fieldNamesCache.Store(t, names)
	return names
}

var fieldNamesCache sync.Map // reflect.Type → map[string]bool

func decodeError(err error, v any) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return err
	case errors.Is(err, io.EOF):
		return badRequest("request body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("request body is truncated JSON")
	case errors.As(err, &syn):
		return badRequest("request body is not valid JSON (at byte %d): %s", syn.Offset, syn.Error())
	case errors.As(err, &typ):
		if typ.Field == "" {
			return badRequest("request body must be a JSON object, got %s", typ.Value)
		}
		typ.Field = jsonPath(typ.Field, v)
		want := jsonKind(typ.Type.String())
		if num, ok := strings.CutPrefix(typ.Value, "number "); ok && (want == "a number" || want == "an integer" && !strings.ContainsAny(num, ".eE")) {
			return badRequest("invalid %s: %s is out of range", typ.Field, num)
		}
		return badRequest("invalid %s: got %s, want %s", typ.Field, typ.Value, want)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return badRequest("invalid request body: %v", err)
}

// jsonPath is the path of a field in v's JSON as a client wrote it:
// encoding/json puts the Go name of an embedded struct in front of its
// fields' names ("fenceRequest.task_id"), which no client sent.
func jsonPath(field string, v any) string {
	names := fieldNames(reflect.TypeOf(v))
	for {
		first, rest, ok := strings.Cut(field, ".")
		if !ok || names[first] {
			return field
		}
		field = rest
	}
}

func jsonKind(goType string) string {
	goType = strings.TrimPrefix(goType, "*")
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map["):
		return "an object"
	case strings.Contains(goType, "int"):
		return "an integer"
	case strings.Contains(goType, "float"):
		return "a number"
	case strings.Contains(goType, "string"):
		return "a string"
	case strings.Contains(goType, "bool"):
		return "a boolean"
	}
	return "a " + goType
}

// unavailable reports errors that mean the database cannot be reached right now
// (connection refused or cut, server shutting down or starting): a 503 the client
// may retry, not a fault of the request or the server.
func unavailable(err error) bool {
	var ne net.Error
	var pe *pgconn.PgError
	var ce *pgconn.ConnectError
	switch {
	case errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	case errors.As(err, &pe):
		// 08xxx connection exceptions, 57P01-57P03 admin/crash shutdown, cannot connect now.
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "connection reset") ||
		strings.Contains(msg, "broken pipe") || strings.Contains(msg, "database is locked")
}
