package driver_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/driver"
)

func validParams() driver.InsertParams {
	return driver.InsertParams{Kind: "email.send", Queue: "default", Args: json.RawMessage(`{"to":"a@b.c"}`), MaxAttempts: 3}
}

// wantField asserts err is an ErrInvalidArgument *ValidationError about field.
func wantField(t *testing.T, err error, field string) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want an invalid %s", field)
	}
	if !errors.Is(err, driver.ErrInvalidArgument) {
		t.Errorf("errors.Is(%v, ErrInvalidArgument) = false, want true", err)
	}
	var ve *driver.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %T %v, want a *driver.ValidationError", err, err)
	}
	if ve.Field != field {
		t.Errorf("Field = %q (%v), want %q", ve.Field, err, field)
	}
	if ve.Reason == "" {
		t.Errorf("Reason is empty, want one that says why")
	}
}

func TestValidateName(t *testing.T) {
	tests := []struct {
		name  string
		value string
		ok    bool
	}{
		{"simple", "default", true},
		{"all allowed characters", "Az09._-:", true},
		{"128 characters", strings.Repeat("a", 128), true},
		{"empty", "", false},
		{"space", "bad kind", false},
		{"129 characters", strings.Repeat("a", 129), false},
		{"slash", "a/b", false},
		{"unicode", "café", false},
		{"NUL", "a\x00b", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := driver.ValidateName("queue", tt.value)
			if tt.ok {
				if err != nil {
					t.Errorf("ValidateName(%q) = %v, want nil", tt.value, err)
				}
				return
			}
			wantField(t, err, "queue")
		})
	}
}

func TestValidateInsertAccepts(t *testing.T) {
	tests := []struct {
		name string
		edit func(p *driver.InsertParams)
		lim  driver.Limits
		want func(t *testing.T, p driver.InsertParams)
	}{
		{"valid", func(p *driver.InsertParams) {}, driver.Limits{}, nil},
		{"empty args become {}", func(p *driver.InsertParams) { p.Args = nil }, driver.Limits{}, func(t *testing.T, p driver.InsertParams) {
			if string(p.Args) != "{}" {
				t.Errorf("Args = %s, want {}", p.Args)
			}
		}},
		{"whitespace args become {}", func(p *driver.InsertParams) { p.Args = json.RawMessage(" \n") }, driver.Limits{}, func(t *testing.T, p driver.InsertParams) {
			if string(p.Args) != "{}" {
				t.Errorf("Args = %q, want {}", p.Args)
			}
		}},
		{"escaped NUL-like text is fine", func(p *driver.InsertParams) { p.Args = json.RawMessage(`{"a":"\\u0000"}`) }, driver.Limits{}, nil},
		{"metadata object", func(p *driver.InsertParams) { p.Metadata = json.RawMessage(`{"trace":"x"}`) }, driver.Limits{}, nil},
		{"priority 0 and timeout 1ms", func(p *driver.InsertParams) { p.Priority, p.Timeout = 0, time.Millisecond }, driver.Limits{}, nil},
		{"idempotency key at the limit", func(p *driver.InsertParams) { p.IdempotencyKey = strings.Repeat("k", driver.MaxIdempotencyKeyLen) }, driver.Limits{}, nil},
		{"payload exactly at the default limit", func(p *driver.InsertParams) {
			p.Args = json.RawMessage(`{"a":"` + strings.Repeat("x", driver.DefaultMaxPayloadBytes-8) + `"}`)
		}, driver.Limits{}, nil},
		{"workflow node with run id", func(p *driver.InsertParams) { id := int64(7); p.WorkflowRunID, p.WorkflowNode = &id, "load" }, driver.Limits{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validParams()
			tt.edit(&p)
			if err := driver.ValidateInsert(&p, tt.lim); err != nil {
				t.Fatalf("ValidateInsert = %v, want nil", err)
			}
			if tt.want != nil {
				tt.want(t, p)
			}
		})
	}
}

func TestValidateInsertRejects(t *testing.T) {
	big := json.RawMessage(`{"a":"` + strings.Repeat("x", 10<<20) + `"}`)
	year10000 := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	year1969 := time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC)
	// The range is of the instant (stored in UTC), not of the year where the
	// time was given: 9999-12-31 23:00 at UTC-5 is year 10000 in UTC (no JSON
	// time can say it: every job read of it failed to encode), and 1970-01-01
	// 00:00 at UTC+5 is in 1969. Both passed.
	west, east := time.FixedZone("UTC-5", -5*3600), time.FixedZone("UTC+5", 5*3600)
	year10000West := time.Date(9999, 12, 31, 23, 0, 0, 0, west)
	year1969East := time.Date(1970, 1, 1, 0, 0, 0, 0, east)
	tests := []struct {
		name  string
		edit  func(p *driver.InsertParams)
		lim   driver.Limits
		field string
	}{
		{"empty kind", func(p *driver.InsertParams) { p.Kind = "" }, driver.Limits{}, "kind"},
		{"kind with space", func(p *driver.InsertParams) { p.Kind = "bad kind" }, driver.Limits{}, "kind"},
		{"kind of 129 characters", func(p *driver.InsertParams) { p.Kind = strings.Repeat("k", 129) }, driver.Limits{}, "kind"},
		{"kind with slash", func(p *driver.InsertParams) { p.Kind = "a/b" }, driver.Limits{}, "kind"},
		{"empty queue", func(p *driver.InsertParams) { p.Queue = "" }, driver.Limits{}, "queue"},
		{"queue with slash", func(p *driver.InsertParams) { p.Queue = "a/b" }, driver.Limits{}, "queue"},
		{"args array", func(p *driver.InsertParams) { p.Args = json.RawMessage(`[]`) }, driver.Limits{}, "args"},
		{"args string", func(p *driver.InsertParams) { p.Args = json.RawMessage(`"x"`) }, driver.Limits{}, "args"},
		{"args number", func(p *driver.InsertParams) { p.Args = json.RawMessage(`1`) }, driver.Limits{}, "args"},
		{"args null", func(p *driver.InsertParams) { p.Args = json.RawMessage(`null`) }, driver.Limits{}, "args"},
		{"args boolean", func(p *driver.InsertParams) { p.Args = json.RawMessage(`true`) }, driver.Limits{}, "args"},
		{"args invalid JSON", func(p *driver.InsertParams) { p.Args = json.RawMessage(`{"a":`) }, driver.Limits{}, "args"},
		{"args object then garbage", func(p *driver.InsertParams) { p.Args = json.RawMessage(`{} x`) }, driver.Limits{}, "args"},
		{"args with \\u0000 in a value", func(p *driver.InsertParams) { p.Args = json.RawMessage(`{"a":"x\u0000y"}`) }, driver.Limits{}, "args"},
		{"args with \\u0000 in a key", func(p *driver.InsertParams) { p.Args = json.RawMessage(`{"\u0000":1}`) }, driver.Limits{}, "args"},
		{"args with \\u0000 nested", func(p *driver.InsertParams) { p.Args = json.RawMessage(`{"a":[{"b":"\u0000"}]}`) }, driver.Limits{}, "args"},
		{"metadata array", func(p *driver.InsertParams) { p.Metadata = json.RawMessage(`[1]`) }, driver.Limits{}, "metadata"},
		{"metadata with \\u0000", func(p *driver.InsertParams) { p.Metadata = json.RawMessage(`{"a":"\u0000"}`) }, driver.Limits{}, "metadata"},
		{"negative priority", func(p *driver.InsertParams) { p.Priority = -1 }, driver.Limits{}, "priority"},
		{"max_attempts 0", func(p *driver.InsertParams) { p.MaxAttempts = 0 }, driver.Limits{}, "max_attempts"},
		{"max_attempts -1", func(p *driver.InsertParams) { p.MaxAttempts = -1 }, driver.Limits{}, "max_attempts"},
		{"negative timeout", func(p *driver.InsertParams) { p.Timeout = -time.Second }, driver.Limits{}, "timeout"},
		{"timeout below 1ms", func(p *driver.InsertParams) { p.Timeout = time.Microsecond }, driver.Limits{}, "timeout"},
		{"timeout of a part millisecond", func(p *driver.InsertParams) { p.Timeout = 1500 * time.Microsecond }, driver.Limits{}, "timeout"},
		{"args with a key twice", func(p *driver.InsertParams) { p.Args = json.RawMessage(`{"a":[{"b":1,"b":2}]}`) }, driver.Limits{}, "args"},
		{"metadata with a key twice", func(p *driver.InsertParams) { p.Metadata = json.RawMessage(`{"m":1,"\u006d":2}`) }, driver.Limits{}, "metadata"},
		{"timeout over a year", func(p *driver.InsertParams) { p.Timeout = driver.MaxTimeout + time.Millisecond }, driver.Limits{}, "timeout"},
		{"10 MB args against the default limit", func(p *driver.InsertParams) { p.Args = big }, driver.Limits{}, "args"},
		{"args over a custom limit", func(p *driver.InsertParams) { p.Args = json.RawMessage(`{"a":"0123456789"}`) }, driver.Limits{MaxPayloadBytes: 10}, "args"},
		{"args + metadata over a custom limit", func(p *driver.InsertParams) {
			p.Args, p.Metadata = json.RawMessage(`{"a":1}`), json.RawMessage(`{"b":2}`)
		}, driver.Limits{MaxPayloadBytes: 10}, "args"},
		{"metadata over a custom limit, the args small", func(p *driver.InsertParams) {
			p.Args, p.Metadata = json.RawMessage(`{}`), json.RawMessage(`{"b":"0123456789"}`)
		}, driver.Limits{MaxPayloadBytes: 10}, "metadata"},
		{"idempotency key too long", func(p *driver.InsertParams) { p.IdempotencyKey = strings.Repeat("k", driver.MaxIdempotencyKeyLen+1) }, driver.Limits{}, "idempotency_key"},
		{"idempotency key with NUL", func(p *driver.InsertParams) { p.IdempotencyKey = "a\x00b" }, driver.Limits{}, "idempotency_key"},
		{"idempotency key not UTF-8", func(p *driver.InsertParams) { p.IdempotencyKey = "a\xffb" }, driver.Limits{}, "idempotency_key"},
		{"run_at after year 9999", func(p *driver.InsertParams) { p.RunAt = &year10000 }, driver.Limits{}, "run_at"},
		{"run_at before 1970", func(p *driver.InsertParams) { p.RunAt = &year1969 }, driver.Limits{}, "run_at"},
		{"run_at in year 10000 in UTC, given in 9999 at UTC-5", func(p *driver.InsertParams) { p.RunAt = &year10000West }, driver.Limits{}, "run_at"},
		{"run_at in 1969 in UTC, given in 1970 at UTC+5", func(p *driver.InsertParams) { p.RunAt = &year1969East }, driver.Limits{}, "run_at"},
		{"workflow node without run id", func(p *driver.InsertParams) { p.WorkflowNode = "load" }, driver.Limits{}, "workflow_node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validParams()
			tt.edit(&p)
			wantField(t, driver.ValidateInsert(&p, tt.lim), tt.field)
		})
	}
}

func TestCustomLimitAllowsMoreThanDefault(t *testing.T) {
	p := validParams()
	p.Args = json.RawMessage(`{"a":"` + strings.Repeat("x", 2<<20) + `"}`)
	if err := driver.ValidateInsert(&p, driver.Limits{MaxPayloadBytes: 4 << 20}); err != nil {
		t.Errorf("2 MiB args with a 4 MiB limit: ValidateInsert = %v, want nil", err)
	}
	wantField(t, driver.ValidateInsert(&p, driver.Limits{}), "args")
}

// TestValidateInsertStorableOnBothDrivers: what PostgreSQL cannot store is refused
// for every caller (library and HTTP), naming the field, on both drivers alike.
func TestValidateInsertStorableOnBothDrivers(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(p *driver.InsertParams)
		field string
	}{
		{"priority above int32", func(p *driver.InsertParams) { p.Priority = driver.MaxInt32 + 1 }, "priority"},
		{"max_attempts above int32", func(p *driver.InsertParams) { p.MaxAttempts = driver.MaxInt32 + 1 }, "max_attempts"},
		{"lone surrogate", func(p *driver.InsertParams) { p.Args = json.RawMessage(`{"a":"\ud800"}`) }, "args"},
		{"invalid UTF-8", func(p *driver.InsertParams) { p.Args = json.RawMessage("{\"a\":\"\xff\"}") }, "args"},
		{"huge exponent", func(p *driver.InsertParams) { p.Args = json.RawMessage(`{"a":1e999999}`) }, "args"},
		{"NUL in metadata", func(p *driver.InsertParams) { p.Metadata = json.RawMessage(`{"a":"\u0000"}`) }, "metadata"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validParams()
			tt.edit(&p)
			wantField(t, driver.ValidateInsert(&p, driver.Limits{}), tt.field)
		})
	}
	p := validParams()
	p.Args = json.RawMessage(`{"pair":"\ud83d\ude00","n":1.5e300}`)
	if err := driver.ValidateInsert(&p, driver.Limits{}); err != nil {
		t.Errorf("a surrogate pair and a large but storable number: %v, want accepted", err)
	}
}

// TestPayloadLimitCountsNumbersWrittenOut: the limit counts a number as
// PostgreSQL keeps it, so a few bytes of exponents cannot become a hundred
// megabytes stored and answered.
func TestPayloadLimitCountsNumbersWrittenOut(t *testing.T) {
	p := validParams()
	p.Args = json.RawMessage(`{"a":[` + strings.Repeat("1e999,", 2000) + `0]}`) // 12 KB given, 2 MB written out
	err := driver.ValidateInsert(&p, driver.Limits{})
	wantField(t, err, "args")
	var ve *driver.ValidationError
	if !errors.As(err, &ve) || !ve.TooLarge || !strings.Contains(err.Error(), "with its numbers written out in full") {
		t.Errorf("ValidateInsert = %v, want a size refusal that says numbers are counted written out", err)
	}
	p.Args = json.RawMessage(`{"a":[` + strings.Repeat("1e999,", 1000) + `0]}`) // 1,001,014 bytes written out
	if err := driver.ValidateInsert(&p, driver.Limits{}); err != nil {
		t.Errorf("1,000 numbers of 1,000 digits: %v, want accepted", err)
	}
}

// Args that are not JSON are called so; JSON of another type is named by it.
func TestArgsRefusalSaysWhatWasGiven(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{`notjson`, "is not valid JSON"}, // once read as null by its first letter
		{`{"a":`, "is not valid JSON"},
		{`null`, "must be a JSON object, got null"},
		{`[1]`, "must be a JSON object, got an array"},
		{`"x"`, "must be a JSON object, got a string"},
		{`12`, "must be a JSON object, got a number"},
	} {
		p := validParams()
		p.Args = json.RawMessage(tc.args)
		err := driver.ValidateInsert(&p, driver.Limits{})
		wantField(t, err, "args")
		if err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("args %q: %v, want %q", tc.args, err, tc.want)
		}
	}
}
