package driver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
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
		_, _, got := checkTokens("f", raw)
		want := decodeTokens("f", raw)
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
		`{"n":1e999}`:                         "",
		`{"n":-1e999}`:                        "written out in full", // 1,001 characters so
		`{"n":1e-999}`:                        "written out in full", // "0." and 999 digits
		`{"n":1e-998}`:                        "",
		`[` + strings.Repeat("1", 1001) + `]`: "digits",
		"\"\xff\"":                            "UTF-8",
		`"\ud800"`:                            "surrogate",
		`{"a":1,"b":{"a":1},"\u0061":2}`:      `names the key "a" twice`,
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

// TestNumberWrittenOut: numberFits's length is the one PostgreSQL's numeric
// writes (the conformance suite compares it with what comes back).
func TestNumberWrittenOut(t *testing.T) {
	for n, want := range map[string]int{
		"1e3": 4, "1E+3": 4, "1.50e1": 4, "25e-3": 5, "0.005e2": 3, "123.4500e1": 8, "-12.5e0": 5,
		"-0e5": 1, "0.00e1": 3, "5e-324": 326, "1e999": 1000, "-1e998": 1000, "1e-998": 1000, "42": 2,
	} {
		if got, ok := numberFits(n); got != want || !ok {
			t.Errorf("numberFits(%s) = %d, %v; want %d, true", n, got, ok, want)
		}
	}
	for _, n := range []string{"1e1000", "-1e999", "1e-999", "1e1001", "1e99999999999999999999", strings.Repeat("1", 1001)} {
		if _, ok := numberFits(n); ok {
			t.Errorf("numberFits(%.20s) = true, want false", n)
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

// keysTwice is checkKeys's reference: a json.Decoder's tokens, a map per open
// object.
func keysTwice(raw []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	type level struct {
		keys    map[string]bool
		wantKey bool
	}
	var open []*level
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		top := (*level)(nil)
		if len(open) > 0 {
			top = open[len(open)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				if top != nil && top.keys != nil {
					top.wantKey = true // the object is this key's value
				}
				open = append(open, &level{keys: map[string]bool{}, wantKey: true})
			case '[':
				if top != nil && top.keys != nil {
					top.wantKey = true
				}
				open = append(open, &level{})
			default:
				open = open[:len(open)-1]
			}
			continue
		case string:
			if top != nil && top.keys != nil && top.wantKey {
				if top.keys[v] {
					return v, true
				}
				top.keys[v] = true
				top.wantKey = false
				continue
			}
		}
		if top != nil && top.keys != nil {
			top.wantKey = true // a value ends; the next string is a key
		}
	}
}

// FuzzCheckKeys holds checkKeys to keysTwice on valid JSON.
func FuzzCheckKeys(f *testing.F) {
	many := func(n int, last string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		b.WriteString(`"` + last + `":0}`)
		return b.String()
	}
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"a":1,"b":2}`, `{"a":{"a":1},"b":[{"a":1},{"a":2}]}`, `{"a":"a","b":"a"}`,
		`{"a":1,"\u0061":2}`, `{"\"":1,"\u0022":2}`, `[{"x":1},{"x":1,"y":{"x":2,"x":3}}]`,
		`{"":1,"":2}`, `"a"`, `[]`, `{}`, `{"a":[],"b":{},"a":null}`, many(40, "k7"), many(40, "new"),
		many(15, "k3"), many(16, "k15"), `{"a\\":1,"a":2}`, `{"é":1,"\u00e9":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) || !utf8.Valid(raw) {
			return
		}
		key, twice := keysTwice(raw)
		err := checkKeys("f", raw)
		if twice != (err != nil) {
			t.Fatalf("checkKeys(%q) = %v, want a key twice: %v (%q)", raw, err, twice, key)
		}
		if twice && !strings.Contains(err.Error(), strconv.Quote(key)) {
			t.Fatalf("checkKeys(%q) = %v, want it to name %q", raw, err, key)
		}
	})
}
