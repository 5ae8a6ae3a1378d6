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
