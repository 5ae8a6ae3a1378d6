package driver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Limits on input that both drivers store alike. PostgreSQL's integer columns
// are 32-bit, its text and jsonb refuse NUL characters, invalid UTF-8 and lone
// surrogates, and its numeric type refuses very long numbers; without these
// checks such input was a 500 on PostgreSQL and accepted on SQLite.
const (
	MaxInt32      = math.MaxInt32 // bound of priority, attempts and other integer columns
	maxNumberLen  = 1000          // characters of a JSON number, as given and written out in full
	maxNumberExp  = 1000          // magnitude of its exponent
	replacementCh = "\uFFFD"
)

// MaxRequestIDBytes bounds a request_id, as the HTTP API always did. Each one
// is kept in an index (the events' and the claim requests'): both drivers
// stored any length through the library, and PostgreSQL fails an index entry
// over ~2.7 kB after compression with an error of its own.
const MaxRequestIDBytes = 200

// CheckRequestID refuses a request_id longer than MaxRequestIDBytes or with a
// NUL character ("" is none, and taken).
func CheckRequestID(id string) error {
	if len(id) > MaxRequestIDBytes {
		return Invalid("request_id", "%d bytes, at most %d", len(id), MaxRequestIDBytes)
	}
	return CheckText("request_id", id)
}

// CheckText refuses NUL characters in an identifier.
func CheckText(field, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return Invalid(field, "contains a NUL character")
	}
	return nil
}

// MaxErrorTextBytes bounds the error message and the stack a failure keeps,
// each. A job keeps every attempt's, and a worker that reported megabytes
// made each retry store and rewrite them all.
const MaxErrorTextBytes = 32 << 10

// FailureText is the error a failure stores for the message a worker reported:
// cleaned (CleanText) and cut to MaxErrorTextBytes (Clip), and "unknown
// error" for an empty one, as a failed job must carry an error (lifecycle
// invariant) and "" would read as none.
func FailureText(msg string) string {
	if msg = Clip(CleanText(msg), MaxErrorTextBytes); msg == "" {
		return "unknown error"
	}
	return msg
}

// StackText is the stack a failure stores: cleaned and cut as FailureText.
func StackText(stack string) string {
	return Clip(CleanText(stack), MaxErrorTextBytes)
}

// Clip cuts s to at most n bytes at a character boundary, saying how much
// it cut (the note adds a few bytes).
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… (%d bytes cut)", len(s)-cut)
}

// CleanText replaces NUL characters and each run of bytes that is not UTF-8 in
// free text (an error message or stack), so that a worker's report is never
// refused for what its error happened to say (PostgreSQL refuses both in text)
// and both drivers store the same text.
func CleanText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, replacementCh), "\x00", replacementCh)
}

// CheckJSON refuses JSON values that a database cannot store as given: invalid
// UTF-8, NUL characters, lone UTF-16 surrogates, numbers longer than
// maxNumberLen characters as given or written out in full (numberFits), and an
// object that names a key twice (checkKeys).
func CheckJSON(field string, raw json.RawMessage) error {
	_, err := CheckJSONSize(field, raw)
	return err
}

// CheckJSONSize is CheckJSON that also returns the size of raw with its
// numbers written out in full, the size a limit on it counts. PostgreSQL's
// jsonb keeps a number as numeric, which it writes without an exponent: 1e300
// comes back as 301 digits. Counted as given, a megabyte of such numbers was
// stored and answered as 150 MB on PostgreSQL and as one on SQLite.
func CheckJSONSize(field string, raw json.RawMessage) (int, error) {
	size, _, err := checkJSONSize(field, raw)
	return size, err
}

// checkJSONSize is CheckJSONSize that also says whether a number of raw has
// an exponent, which WriteNumbersOut would write out: without one it need not
// walk raw again.
func checkJSONSize(field string, raw json.RawMessage) (size int, exponent bool, err error) {
	if len(raw) == 0 {
		return 0, false, nil
	}
	if !utf8.Valid(raw) {
		return 0, false, Invalid(field, "is not valid UTF-8")
	}
	if err := checkEscapes(raw); err != nil {
		return 0, false, Invalid(field, "%v", err)
	}
	if json.Valid(raw) {
		growth, exponent, err := checkTokens(field, raw)
		if err != nil {
			return 0, false, err
		}
		return len(raw) + growth, exponent, checkKeys(field, raw)
	}
	return 0, false, decodeTokens(field, raw) // it names what is wrong and where
}

// keysInLine is how many keys of one object checkKeys compares one by one
// before it puts them in a map.
const keysInLine = 16

// checkKeys refuses an object, at any depth of valid JSON, that names a key
// twice. RFC 8259 leaves what such an object means to the reader, and the two
// drivers read it differently: PostgreSQL's jsonb keeps the last value,
// SQLite's text keeps both, so a handler would get other args from one driver
// than from the other. Go's encoding/json/v2 refuses them too. Keys compare as
// decoded ("a" and "\u0061" are one key). One pass, allocating only for a key
// with an escape or an object of more than keysInLine keys.
func checkKeys(field string, raw []byte) error {
	type object struct {
		first int                 // its first key in keys; -1: an array
		seen  map[string]struct{} // its keys, once it has more than keysInLine
	}
	var obuf [16]object
	var kbuf [32]string
	open, keys := obuf[:0], kbuf[:0]
	wantKey := false
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '{':
			open = append(open, object{first: len(keys)})
			wantKey = true
		case '[':
			open = append(open, object{first: -1})
			wantKey = false
		case '}', ']':
			if o := open[len(open)-1]; o.first >= 0 {
				keys = keys[:o.first]
			}
			open = open[:len(open)-1]
			wantKey = false
		case ',':
			wantKey = open[len(open)-1].first >= 0
		case '"':
			j, escaped := i+1, false
			for raw[j] != '"' {
				if raw[j] == '\\' {
					j++
					escaped = true
				}
				j++
			}
			if wantKey {
				wantKey = false
				k := unsafeString(raw[i+1 : j])
				if escaped {
					var err error
					if k, err = decodeString(raw[i : j+1]); err != nil {
						return Invalid(field, "is not valid JSON: %v", err)
					}
				}
				o := &open[len(open)-1]
				if o.seen == nil && len(keys)-o.first < keysInLine {
					for _, seen := range keys[o.first:] {
						if seen == k {
							return Invalid(field, "names the key %q twice in one object", Clip(k, 100))
						}
					}
					keys = append(keys, k)
				} else {
					if o.seen == nil {
						o.seen = make(map[string]struct{}, 2*keysInLine)
						for _, seen := range keys[o.first:] {
							o.seen[strings.Clone(seen)] = struct{}{}
						}
						keys = keys[:o.first]
					}
					if _, ok := o.seen[k]; ok {
						return Invalid(field, "names the key %q twice in one object", Clip(k, 100))
					}
					o.seen[strings.Clone(k)] = struct{}{}
				}
			}
			i = j
		}
	}
	return nil
}

// decodeString decodes a JSON string. (A function of its own, so that
// checkKeys takes no key's address and keeps its keys off the heap.)
func decodeString(b []byte) (s string, err error) {
	err = json.Unmarshal(b, &s)
	return s, err
}

// unsafeString is b as a string without a copy; b must not change while the
// string is used (checkKeys holds it only for its own pass over b).
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// decodeTokens applies CheckJSON's rules token by token with a json.Decoder.
func decodeTokens(field string, raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return Invalid(field, "is not valid JSON: %v", err)
		}
		switch v := tok.(type) {
		case string:
			if strings.IndexByte(v, 0) >= 0 {
				return Invalid(field, "contains a NUL character (\\u0000)")
			}
		case json.Number:
			if _, ok := numberFits(string(v)); !ok {
				return errNumber(field)
			}
		}
	}
}

// checkTokens applies CheckJSON's string and number rules to valid JSON in one
// pass without allocating: it runs for every enqueue and every result, where a
// json.Decoder took an eighth of a loaded worker's CPU (pprof). In valid JSON a
// NUL can only be the escape \u0000. It returns how many bytes longer raw is
// with its numbers written out in full (numberFits), and whether one of them
// has an exponent.
func checkTokens(field string, raw []byte) (growth int, exponent bool, err error) {
	err = scanJSON(raw, func(i int) error {
		if raw[i+1] == 'u' && string(raw[i+2:i+6]) == "0000" {
			return Invalid(field, "contains a NUL character (\\u0000)")
		}
		return nil
	}, func(i, j int) error {
		full, ok := numberFits(unsafeString(raw[i:j]))
		if !ok {
			return errNumber(field)
		}
		growth += max(0, full-(j-i))
		exponent = exponent || bytes.ContainsAny(raw[i:j], "eE")
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	return growth, exponent, nil
}

// scanJSON walks valid JSON raw once: escape(i) at each backslash in a string
// (raw[i] is the backslash; nil: none), and number(i, j) at each number,
// raw[i:j], a run of number bytes outside a string. An error from either ends
// the walk with it.
func scanJSON(raw []byte, escape func(i int) error, number func(i, j int) error) error {
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if inString {
			switch c {
			case '\\':
				if escape != nil {
					if err := escape(i); err != nil {
						return err
					}
				}
				i++ // the escaped byte; a \u escape's hex digits are plain bytes
			case '"':
				inString = false
			}
			continue
		}
		switch {
		case c == '"':
			inString = true
		case c == '-' || (c >= '0' && c <= '9'):
			j := i
			for j < len(raw) && strings.IndexByte("+-.0123456789eE", raw[j]) >= 0 {
				j++
			}
			if err := number(i, j); err != nil {
				return err
			}
			i = j - 1
		}
	}
	return nil
}

// checkEscapes finds \u escapes of lone surrogates in valid JSON.
func checkEscapes(raw []byte) error {
	hex := func(i int) (int, bool) {
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 32)
		return int(n), err == nil
	}
	for i := 0; i < len(raw); {
		if raw[i] != '\\' {
			i++
			continue
		}
		c, ok := hex(i)
		if !ok {
			i += 2 // another escape: \" \\ \/ \b \f \n \r \t
			continue
		}
		switch {
		case c >= 0xD800 && c <= 0xDBFF:
			if lo, ok := hex(i + 6); !ok || lo < 0xDC00 || lo > 0xDFFF {
				return errors.New(`has a lone UTF-16 surrogate \u` + string(raw[i+2:i+6]))
			}
			i += 12
		case c >= 0xDC00 && c <= 0xDFFF:
			return errors.New(`has a lone UTF-16 surrogate \u` + string(raw[i+2:i+6]))
		default:
			i += 6
		}
	}
	return nil
}

func errNumber(field string) error {
	return Invalid(field, "has a number longer than %d characters as given or written out in full, as PostgreSQL keeps it (1e300 is 301 digits), or an exponent beyond ±%d",
		maxNumberLen, maxNumberExp)
}

// WriteNumbersOut returns raw, valid JSON that CheckJSON passed, with every
// number that has an exponent written out in full, as PostgreSQL's jsonb
// gives it back (numberFits): 1.50e1 is 15.0, 1e2 is 100. SQLite keeps JSON
// text as given, so a handler whose args have an int field decoded {"n":1e2}
// on PostgreSQL and failed on SQLite for the same enqueue (helper-79). Raw
// comes back as it is (not copied) when no number has an exponent.
func WriteNumbersOut(raw json.RawMessage) json.RawMessage {
	var out []byte // nil until the first number with an exponent
	last := 0      // raw[last:] is not in out yet
	_ = scanJSON(raw, nil, func(i, j int) error {
		if n := raw[i:j]; bytes.ContainsAny(n, "eE") {
			out = append(append(out, raw[last:i]...), writtenOut(string(n))...)
			last = j
		}
		return nil
	})
	if out == nil {
		return raw
	}
	return append(out, raw[last:]...)
}

// writtenOut is the JSON number n, which has an exponent within
// ±maxNumberExp (numberFits), as PostgreSQL's numeric writes it: no exponent,
// the integer digits without leading zeros (at least "0"), and, if its scale
// (the fraction's digits less the exponent) is above zero, a point and that
// many digits; a sign only below zero.
func writtenOut(n string) string {
	mant, exp, _ := strings.Cut(strings.ToLower(n), "e")
	e, err := strconv.Atoi(exp)
	if err != nil {
		return n // not a number CheckJSON passed
	}
	neg := strings.HasPrefix(mant, "-")
	intPart, frac, _ := strings.Cut(strings.TrimPrefix(mant, "-"), ".")
	digits := intPart + frac
	point := len(intPart) + e // the point's place in digits, maybe outside them
	var b strings.Builder
	switch {
	case point <= 0:
		b.WriteString("0")
	case point >= len(digits):
		b.WriteString(strings.TrimLeft(digits, "0"))
		if b.Len() > 0 {
			b.WriteString(strings.Repeat("0", point-len(digits)))
		}
	default:
		b.WriteString(strings.TrimLeft(digits[:point], "0"))
	}
	if b.Len() == 0 {
		b.WriteString("0")
	}
	if scale := len(frac) - e; scale > 0 {
		b.WriteString(".")
		if point < 0 {
			b.WriteString(strings.Repeat("0", -point))
			b.WriteString(digits)
		} else {
			b.WriteString(digits[point:])
		}
	}
	out := b.String()
	if neg && strings.Trim(digits, "0") != "" {
		out = "-" + out
	}
	return out
}

// numberFits reports whether the JSON number n is at most maxNumberLen
// characters, both as given (SQLite keeps it so) and written out in full, as
// PostgreSQL's numeric writes it back, and returns the length written out.
// That is a sign if it is below zero, the integer digits without leading
// zeros (at least "0"), and, if its scale (the fraction's digits less the
// exponent) is above zero, a point and that many digits: 1.50e1 is "15.0",
// 25e-3 "0.025", 1e3 "1000", -0e5 "0". Limited so, a number PostgreSQL gives
// back passes this check too.
func numberFits(n string) (full int, ok bool) {
	if len(n) <= maxNumberLen && strings.IndexByte(n, 'e') < 0 && strings.IndexByte(n, 'E') < 0 {
		// No exponent: PostgreSQL writes it as given, but for a "-0".
		return len(n), true
	}
	mant, exp, hasExp := strings.Cut(strings.ToLower(n), "e")
	if len(mant) > maxNumberLen {
		return 0, false
	}
	e := 0
	if hasExp {
		var err error
		if e, err = strconv.Atoi(exp); err != nil || e > maxNumberExp || e < -maxNumberExp {
			return 0, false
		}
	}
	neg := strings.HasPrefix(mant, "-")
	intPart, frac, _ := strings.Cut(strings.TrimPrefix(mant, "-"), ".")
	digits := len(intPart) + len(frac)
	zeros := len(intPart) - len(strings.TrimLeft(intPart, "0"))
	if zeros == len(intPart) {
		zeros += len(frac) - len(strings.TrimLeft(frac, "0"))
	}
	intDigits := len(intPart) + e - zeros
	if zeros == digits { // zero: "0", with no sign
		intDigits, neg = 1, false
	}
	full = max(1, intDigits)
	if scale := len(frac) - e; scale > 0 {
		full += 1 + scale
	}
	if neg {
		full++
	}
	return full, full <= maxNumberLen
}
