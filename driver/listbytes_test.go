package driver

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// A job's weight in a listing is what its texts and JSON take in its answer,
// escapes included, and the answer writes <, > and & as they are: a page
// within ListParams.MaxBytes came out up to six times its bound, args of <
// written \u003c and an error of control characters \u0001 each (helper-90).
func TestJobBytesIsWhatTheAnswerWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "<", ">", "&", "\"", "\\", "\n", "\t", "\b", "\f", "\x01", "\x1f", "\x7f", "é", "\u2028", "\u2029", "\xff", "\xe2\x80", "😀"}
	text := func() string {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	for range 2000 {
		s := text()
		enc, err := json.Marshal(s) // the escapes are the same but for HTML's
		if err != nil {
			t.Fatal(err)
		}
		want := len(enc) - 2 - 5*(strings.Count(string(enc), `\u003c`)+strings.Count(string(enc), `\u003e`)+strings.Count(string(enc), `\u0026`))
		if got := quotedBytes(s); got != want {
			t.Fatalf("quotedBytes(%q) = %d; encoding/json writes %d bytes: %s", s, got, want, enc)
		}
	}

	// A job of args, result and errors of those characters: its answer, less
	// the same job's with every chosen part empty, is its weight.
	args := json.RawMessage(`{"html":"<b>&amp;</b>","sep":"` + "\u2028" + `"}`)
	j := &Job{ID: 1, Kind: "k", Queue: "q", Args: args, Result: json.RawMessage(`["<>"]`), Error: "bad\x01\x02",
		Errors: []AttemptError{{Attempt: 1, At: time.Date(2026, 12, 7, 23, 0, 0, 123456000, time.UTC), Error: "x\x03<", Stack: "a\nb"}}}
	bare := &Job{ID: 1, Kind: "k", Queue: "q", Args: json.RawMessage(`{}`), Result: json.RawMessage(`null`)}
	full, empty := answer(t, j), answer(t, bare)
	if bytes.Contains(full, []byte(`\u003c`)) {
		t.Errorf("the job's JSON, written as the server writes its answers, escapes < for HTML: %s", full)
	}
	// The bare job's {} and null, and its error's null against "", are in
	// both; the frame of its one error entry is counted at its bound.
	got, diff := JobBytes(j), len(full)-len(empty)+len(`{}`)+len(`null`)+len(`null`)-len(`""`)
	if got < diff || got > diff+attemptErrorFrame {
		t.Errorf("JobBytes = %d; the answer grew %d bytes with the job's chosen parts (within one error frame, %d, above it)\n%s", got, diff, attemptErrorFrame, full)
	}
}

// answer is v as the server writes it (server.writeJSON: no HTML escapes).
func answer(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
