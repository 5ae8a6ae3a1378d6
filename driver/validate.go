package driver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultMaxPayloadBytes bounds args and metadata unless Limits says otherwise.
const DefaultMaxPayloadBytes = 1 << 20

// MaxIdempotencyKeyLen bounds idempotency keys.
const MaxIdempotencyKeyLen = 255

// Limits are the configurable bounds of ValidateInsert.
type Limits struct {
	MaxPayloadBytes int // args + metadata; 0: DefaultMaxPayloadBytes
}

// MaxTimeout is the longest job timeout: a year, as the HTTP API takes it.
const MaxTimeout = 366 * 24 * time.Hour

// keywordConnString matches a PostgreSQL keyword/value connection string: a
// keyword that says where or as whom to connect, then = (libpq allows spaces
// around it).
var keywordConnString = regexp.MustCompile(`(?:^|\s)(?:host|hostaddr|port|dbname|user|password|passfile|sslmode|service)\s*=`)

// IsKeywordConnString reports whether a database URL is a PostgreSQL
// keyword/value connection string (host=db dbname=app …), which is no SQLite
// path: taken for one, it made a SQLite file of that name, its password in
// the name, and served from it the jobs meant for PostgreSQL.
func IsKeywordConnString(url string) bool {
	return !strings.HasPrefix(url, "file:") && !strings.HasPrefix(url, "sqlite://") && keywordConnString.MatchString(url)
}

// ValidateName checks a kind or queue name: 1–128 ASCII letters, digits or "._-:".
func ValidateName(field, s string) error {
	if s == "" {
		return Invalid(field, "must not be empty")
	}
	if len(s) > 128 {
		return Invalid(field, "%d characters, at most 128 allowed", len(s))
	}
	for i, c := range s { // by character: a byte of 'é' read as 'Ã'
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == '-' || c == ':'
		if !ok {
			return Invalid(field, "%q has character %q at byte %d; use ASCII letters, digits and ._-:", s, c, i)
		}
	}
	return nil
}

// MaxWorkerIDLen bounds a worker's id, which every lease and event it writes holds.
const MaxWorkerIDLen = 200

// ValidateWorkerID refuses a worker id that is empty, longer than
// MaxWorkerIDLen bytes, or not text every driver can store (UTF-8 without NUL
// bytes): on PostgreSQL every claim under such an id failed.
func ValidateWorkerID(field, id string) error {
	switch {
	case id == "":
		return Invalid(field, "is required")
	case len(id) > MaxWorkerIDLen:
		return Invalid(field, "%d bytes, at most %d", len(id), MaxWorkerIDLen)
	case !utf8.ValidString(id) || bytes.IndexByte([]byte(id), 0) >= 0:
		return Invalid(field, "%q must be UTF-8 text without NUL bytes", id)
	}
	return nil
}

// ValidateInsert checks p and fills in what a driver needs: args {} when empty.
// It does not fill in queue or max_attempts; the caller's defaults do.
func ValidateInsert(p *InsertParams, lim Limits) error {
	if err := ValidateName("kind", p.Kind); err != nil {
		return err
	}
	if err := ValidateName("queue", p.Queue); err != nil {
		return err
	}
	max := lim.MaxPayloadBytes
	if max <= 0 {
		max = DefaultMaxPayloadBytes
	}
	if len(trimJSONSpace(p.Args)) == 0 {
		p.Args = json.RawMessage("{}")
	}
	argsSize, argsExp, err := validateObject("args", p.Args)
	if err != nil {
		return err
	}
	metaSize, metaExp := 0, false
	if len(p.Metadata) == 0 {
		p.Metadata = nil // empty is none, on every driver (PostgreSQL would refuse '' as jsonb)
	} else {
		if metaSize, metaExp, err = validateObject("metadata", p.Metadata); err != nil {
			return err
		}
	}
	if n := argsSize + metaSize; n > max {
		// The limit is on the two together; the error names the larger one, the
		// one to shrink, and gives both sizes.
		field := "args"
		if metaSize > argsSize {
			field = "metadata"
		}
		return &ValidationError{Field: field, TooLarge: true, Reason: fmt.Sprintf(
			"args (%s) and metadata (%s) are %d bytes together, the limit is %d",
			SizeText(len(p.Args), argsSize), SizeText(len(p.Metadata), metaSize), n, max)}
	}
	// Numbers as PostgreSQL's jsonb gives them back, on every driver (only
	// an object with an exponent is walked again).
	if argsExp {
		p.Args = WriteNumbersOut(p.Args)
	}
	if metaExp {
		p.Metadata = WriteNumbersOut(p.Metadata)
	}
	if p.Priority < 0 {
		return Invalid("priority", "%d is negative; 0 is the highest priority", p.Priority)
	}
	if p.Priority > MaxInt32 {
		return Invalid("priority", "%d, at most %d", p.Priority, MaxInt32)
	}
	if p.MaxAttempts < 1 || p.MaxAttempts > MaxInt32 {
		return Invalid("max_attempts", "%d, must be 1 to %d", p.MaxAttempts, MaxInt32)
	}
	if p.Timeout < 0 {
		return Invalid("timeout", "%s is negative", p.Timeout)
	}
	if p.Timeout > 0 && p.Timeout < time.Millisecond {
		return Invalid("timeout", "%s is below the 1ms resolution", p.Timeout)
	}
	if p.Timeout%time.Millisecond != 0 {
		return Invalid("timeout", "%s is not a whole number of milliseconds (the resolution)", p.Timeout)
	}
	if p.Timeout > MaxTimeout {
		return Invalid("timeout", "%s, at most a year (%s)", p.Timeout, MaxTimeout)
	}
	if len(p.IdempotencyKey) > MaxIdempotencyKeyLen {
		return Invalid("idempotency_key", "%d bytes, at most %d allowed", len(p.IdempotencyKey), MaxIdempotencyKeyLen)
	}
	if !utf8.ValidString(p.IdempotencyKey) || bytes.IndexByte([]byte(p.IdempotencyKey), 0) >= 0 {
		return Invalid("idempotency_key", "must be UTF-8 text without NUL bytes")
	}
	if p.RunAt != nil {
		if err := CheckTime("run_at", *p.RunAt); err != nil {
			return err
		}
	}
	if p.WorkflowRunID == nil && p.WorkflowNode != "" {
		return Invalid("workflow_node", "set without workflow_run_id")
	}
	return nil
}

// CheckTime refuses a time a job cannot be stored with: one outside the years
// 1970 to 9999 in UTC (a job with a time past 9999 could not be encoded as
// JSON, so no API could answer it). The zero time passes: it means "not set".
// The year is the instant's in UTC, as it is stored and read back: in the zone
// it was given in, 9999-12-31T23:00:00-05:00 (year 10000 in UTC) passed.
func CheckTime(field string, t time.Time) error {
	if t.IsZero() {
		return nil
	}
	if y := t.UTC().Year(); y < 1970 || y > 9999 {
		return Invalid(field, "%s is out of range (years 1970 to 9999 in UTC)", t.Format(time.RFC3339))
	}
	return nil
}

// CheckResult refuses a job result that is not valid JSON, or that a database
// cannot store as given (CheckJSON); an empty result is stored as JSON null.
// Both drivers check it before any write, so a bad result fails its own call
// (or, in a batch, its own outcome) alike.
func CheckResult(raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	if !json.Valid(raw) {
		return Invalid("result", "is not valid JSON")
	}
	return CheckJSON("result", raw)
}

// SizeText gives a JSON value's size in bytes, and the size its limit counts
// when its numbers written out in full (CheckJSONSize) make it larger.
func SizeText(given, counted int) string {
	if counted == given {
		return fmt.Sprintf("%d bytes", given)
	}
	return fmt.Sprintf("%d bytes, %d with its numbers written out in full", given, counted)
}

// trimJSONSpace trims the whitespace JSON allows around a value (space, tab,
// CR, LF) and no other: bytes.TrimSpace also trimmed Unicode spaces (U+00A0,
// U+0085, U+2028, U+3000), so args such as "\u00a0{}" were judged valid and
// stored as they came, invalid JSON in SQLite and a 500 from PostgreSQL.
func trimJSONSpace(b []byte) []byte { return bytes.Trim(b, " \t\r\n") }

// validateObject requires a JSON object without NUL characters (PostgreSQL's jsonb
// rejects \u0000, so both drivers refuse it alike) and returns the size a
// limit counts (CheckJSONSize), whitespace around it included.
func validateObject(field string, raw json.RawMessage) (size int, exponent bool, err error) {
	t := trimJSONSpace(raw)
	if len(t) > 0 && !json.Valid(t) {
		// Before the type: `notjson` is not JSON, not null.
		return 0, false, Invalid(field, "is not valid JSON")
	}
	if len(t) == 0 || t[0] != '{' {
		return 0, false, Invalid(field, "must be a JSON object, got %s", describeJSON(t))
	}
	// What PostgreSQL's jsonb cannot store (NUL, lone surrogates, invalid UTF-8,
	// huge numbers) is refused on both drivers alike.
	n, exponent, err := checkJSONSize(field, t)
	return n + len(raw) - len(t), exponent, err
}

func describeJSON(t []byte) string {
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	if t[0] == '-' || t[0] >= '0' && t[0] <= '9' {
		return "a number"
	}
	return fmt.Sprintf("%.20q", t)
}

// DefaultLease is the lease of a claim, and the extension of a heartbeat,
// whose LeaseDuration is 0 or less.
const DefaultLease = 30 * time.Second

// CheckClaim refuses claim parameters no driver can honour, naming the field:
// an owner that is no worker id (ValidateWorkerID; an empty one would leave a
// claimed job without an owner) and a request_id CheckRequestID refuses (a
// NUL PostgreSQL cannot store, or one too long). Both drivers call it first,
// so they refuse alike.
func CheckClaim(p ClaimParams) error {
	if err := ValidateWorkerID("owner", p.Owner); err != nil {
		return err
	}
	if err := CheckRequestID(p.RequestID); err != nil {
		return err
	}
	if p.ReplayOnly && p.RequestID == "" {
		return Invalid("request_id", "is required with replay_only: it names the claim to collect")
	}
	return nil
}

// CheckToken refuses a bearer token that cannot arrive as given: whitespace
// around it (HTTP trims a header value, so a server given "secret " compared
// every client's "secret" with it and refused them all; a token read from a
// file keeps its line ending), or a control character, which no HTTP client
// sends (Go's fails the request with its own text). field names it.
func CheckToken(field, token string) error {
	if strings.TrimSpace(token) != token {
		return Invalid(field, "has whitespace around it (a file's line ending?), which HTTP trims from the header it travels in: no client could send it as given")
	}
	for _, r := range token {
		if r < 0x20 || r == 0x7f {
			return Invalid(field, "has a control character (%U), which no HTTP client sends", r)
		}
	}
	return nil
}
