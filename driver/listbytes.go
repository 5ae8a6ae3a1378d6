package driver

import "unicode/utf8"

// JobBytes is what a job weighs in a listing (ListParams.MaxBytes): the bytes
// its args, metadata, result, error and error history take in its JSON answer,
// the parts whose size its callers chose. A text's escapes are counted (a
// control character is six bytes there, \u0001), and so is each error
// entry's frame. The rest is a few hundred bytes a job, which a listing's
// Limit bounds.
func JobBytes(j *Job) int {
	n := rawJSONBytes(j.Args) + rawJSONBytes(j.Metadata) + rawJSONBytes(j.Result) + quotedBytes(j.Error)
	for _, e := range j.Errors {
		n += attemptErrorFrame + quotedBytes(e.Error) + quotedBytes(e.Stack)
	}
	return n
}

// attemptErrorFrame is what an error entry's JSON takes besides its texts:
// {"attempt":N,"at":"…","error":"","stack":""} and a comma.
const attemptErrorFrame = 80

// rawJSONBytes is what stored JSON takes in an answer: itself, but for
// U+2028 and U+2029, which encoding/json always escapes (\u2028: six bytes
// for three).
func rawJSONBytes(raw []byte) int {
	n := len(raw)
	for i := 0; i+2 < len(raw); i++ {
		if raw[i] == 0xe2 && raw[i+1] == 0x80 && (raw[i+2] == 0xa8 || raw[i+2] == 0xa9) {
			n += 3
		}
	}
	return n
}

// quotedBytes is what encoding/json writes for s (without HTML's escapes),
// quotes left out: \n, \t, \", \\ and the like take two bytes, another control character six,
// a byte that is not UTF-8 six (\ufffd), U+2028 and U+2029 six.
func quotedBytes(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
				n += 2
			case c < 0x20:
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 6
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// DefaultListLimit is the jobs a listing answers when ListParams.Limit is 0.
const DefaultListLimit = 100

// ListFull reports whether a listing of p that has read n jobs weighing
// bytes (JobBytes) in all has read enough: Limit jobs (0: 100), or, with
// MaxBytes, two or more jobs weighing more than MaxBytes. A driver reads no
// row after it.
func ListFull(p ListParams, n, bytes int) bool {
	limit := p.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	return n >= limit || (p.MaxBytes > 0 && n >= 2 && bytes > p.MaxBytes)
}

// PageFit is how many of jobs, a listing's answer in its order, make a page
// of at most limit jobs weighing at most maxBytes (0: no bound) in all; the
// first job always does, whatever it weighs. A caller that listed limit+1
// jobs with MaxBytes = maxBytes gets fewer than len(jobs) exactly when more
// jobs follow the page: the listing stops after the job that goes over
// (ListFull), and that job is not in the page.
func PageFit(jobs []*Job, limit, maxBytes int) int {
	bytes := 0
	for i, j := range jobs {
		if i == limit {
			return i
		}
		bytes += JobBytes(j)
		if i > 0 && maxBytes > 0 && bytes > maxBytes {
			return i
		}
	}
	return len(jobs)
}
