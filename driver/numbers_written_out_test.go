package driver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/testdb"
)

// WriteNumbersOut writes a number with an exponent as PostgreSQL's jsonb
// gives it back, so that SQLite stores what PostgreSQL would: a handler whose
// args have an int field decoded {"n":1e2} on PostgreSQL and failed on SQLite
// (helper-79). Numbers without one, and anything in a string, stay as given.
func TestWriteNumbersOut(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"n":1e2}`, `{"n":100}`},
		{`{"a":1.50e1,"b":25e-3,"c":1e3,"d":-0e5,"e":0.00e1}`, `{"a":15.0,"b":0.025,"c":1000,"d":0,"e":0.0}`},
		{`[-1.5E+2, 123.456e-1, 1.5e-1, 10e-1, 0.001e3, 007e1]`, `[-150, 12.3456, 0.15, 1.0, 1, 70]`},
		{`{"s":"1e5","t":"a\"1e5\\","n":2e0}`, `{"s":"1e5","t":"a\"1e5\\","n":2}`},
		{`{"n":-0.0e0}`, `{"n":0.0}`},
	} {
		if got := string(driver.WriteNumbersOut(json.RawMessage(c.in))); got != c.want {
			t.Errorf("WriteNumbersOut(%s) = %s, want %s", c.in, got, c.want)
		}
	}
	raw := json.RawMessage(`{"n":1.5,"s":"2e5","m":-0}`)
	if got := driver.WriteNumbersOut(raw); &got[0] != &raw[0] || string(got) != string(raw) {
		t.Errorf("WriteNumbersOut(%s) = %s, a copy; want raw itself", raw, got)
	}
}

// TestWriteNumbersOutAsPostgreSQL compares WriteNumbersOut with what
// PostgreSQL's jsonb gives back, number by number, over random numbers with
// exponents: leading and trailing zeros, signs, fractions, exponents of
// either sign and case.
func TestWriteNumbersOutAsPostgreSQL(t *testing.T) {
	ctx := context.Background()
	conn := testdb.Connect(ctx, t)
	r := rand.New(rand.NewPCG(1, 2))
	digits := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte(byte('0' + r.IntN(10)))
		}
		return b.String()
	}
	nums := make([]string, 2000)
	for i := range nums {
		n := ""
		if r.IntN(3) == 0 {
			n = "-"
		}
		if r.IntN(4) == 0 {
			n += "0"
		} else {
			n += string(byte('1'+r.IntN(9))) + digits(r.IntN(6))
		}
		if r.IntN(2) == 0 {
			n += "." + digits(1+r.IntN(6))
		}
		n += []string{"e", "E"}[r.IntN(2)] + []string{"", "+", "-"}[r.IntN(3)] + fmt.Sprint(r.IntN(25))
		nums[i] = n
	}
	raw := "[" + strings.Join(nums, ",") + "]"
	var pg string
	if err := conn.QueryRow(ctx, "SELECT $1::text::jsonb::text", raw).Scan(&pg); err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.Trim(pg, "[]"), ", ")
	got := strings.Split(strings.Trim(string(driver.WriteNumbersOut(json.RawMessage(raw))), "[]"), ",")
	if len(got) != len(nums) || len(want) != len(nums) {
		t.Fatalf("%d numbers written out, PostgreSQL gave %d, want %d", len(got), len(want), len(nums))
	}
	bad := 0
	for i := range nums {
		if got[i] != want[i] {
			if bad++; bad <= 10 {
				t.Errorf("%s: written out %s, PostgreSQL gives %s", nums[i], got[i], want[i])
			}
		}
	}
	if bad > 10 {
		t.Errorf("… %d numbers in all differ", bad)
	}
}
