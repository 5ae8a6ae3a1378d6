package driver

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzCheckTokens holds the one-pass checker to the decoder it replaced on
// valid JSON: the same verdict and the same message.
func FuzzCheckTokens(f *testing.F) {
	for _, s := range []string{
		`null`, `{"a":1}`, `[1,2.5,-3e10,"x"]`, `"\u0000"`, `{"k":"a\u0000b"}`, `"\\u0000"`,
		`"\\\u0000"`, `{"n":1e1001}`, `{"n":1E-999}`, `-0.5e+7`, `"1e9999"`,
		`[` + strings.Repeat("9", 1001) + `]`, `[` + strings.Repeat("9", 1000) + `]`,
		`{"\u0000":1}`, `{"a":"\"","b":1e2000}`, `"\ud83d\ude00"`, `true`, `[[],{}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		got, want := checkTokens("f", raw), decodeTokens("f", raw)
		if (got == nil) != (want == nil) || (got != nil && got.Error() != want.Error()) {
			t.Fatalf("checkTokens(%q) = %v, decoder says %v", raw, got, want)
		}
	})
}

func TestCheckJSONVerdicts(t *testing.T) {
	for raw, wantErr := range map[string]string{
		`{"a":[1,"b",{"c":null}]}`:            "",
		`{"a":"x\u0000"}`:                     "NUL",
		`"\\u0000"`:                           "",
		`{"n":1e1001}`:                        "exponent",
		`[` + strings.Repeat("1", 1001) + `]`: "digits",
		"\"\xff\"":                            "UTF-8",
		`"\ud800"`:                            "surrogate",
	} {
		err := CheckJSON("args", json.RawMessage(raw))
		switch {
		case wantErr == "" && err != nil:
			t.Errorf("CheckJSON(%.40q) = %v, want nil", raw, err)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("CheckJSON(%.40q) = %v, want an error saying %q", raw, err, wantErr)
		}
	}
}

// TestDecodeAttemptErrors: no history reads as an empty, non-nil list whatever
// its stored form; a history keeps its entries; a malformed one is an error.
func TestDecodeAttemptErrors(t *testing.T) {
	for _, s := range []string{``, `[]`, `null`} {
		got, err := DecodeAttemptErrors([]byte(s))
		if err != nil || got == nil || len(got) != 0 {
			t.Errorf("%q: got %#v, %v; want an empty list", s, got, err)
		}
	}
	got, err := DecodeAttemptErrors([]byte(`[{"attempt":2,"at":"2026-01-02T03:04:05Z","error":"boom"}]`))
	if err != nil || len(got) != 1 || got[0].Attempt != 2 || got[0].Error != "boom" || got[0].At.Year() != 2026 {
		t.Errorf("one entry: got %#v, %v", got, err)
	}
	if _, err := DecodeAttemptErrors([]byte(`[{"attempt":"x"}]`)); err == nil {
		t.Error("a malformed history decoded without error")
	}
}
