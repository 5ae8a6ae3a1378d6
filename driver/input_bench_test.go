package driver

import (
	"encoding/json"
	"testing"
)

// benchArgs is a job's args of the usual kind: ids, amounts, text, a list.
var benchArgs = json.RawMessage(`{"order_id":918273645,"customer":"c_8f3a2b","amount_cents":129900,"currency":"EUR",` +
	`"items":[{"sku":"A-1","qty":2,"price":499.5},{"sku":"B-7","qty":1,"price":300}],"note":"leave at the door \"back\"","retry":false}`)

// BenchmarkCheckJSON is the check every enqueue's args and every result pass.
func BenchmarkCheckJSON(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := CheckJSONSize("args", benchArgs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteNumbersOut is what ValidateInsert adds to an enqueue whose
// args hold no exponent (most): a walk, no copy.
func BenchmarkWriteNumbersOut(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if out := WriteNumbersOut(benchArgs); len(out) != len(benchArgs) {
			b.Fatal("copied")
		}
	}
}
