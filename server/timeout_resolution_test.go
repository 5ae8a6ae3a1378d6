package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/internal/testdb"
)

// timeout_seconds is a whole number of milliseconds, at any size: a fraction
// of one is refused, not rounded away. The check allowed a millionth of the
// value, meant for binary floating point (0.3 is 0.29999…): from about 500 s
// up that is half a millisecond and more, and 600.0004 was stored as 600 s
// (31622399.9 as the year) while 0.0015 was refused. Whole milliseconds of
// every size, written as floats do, are taken as given; nothing is written
// for a refused one.
func TestTimeoutSecondsFractionOfAMillisecondIsRefusedAtAnySize(t *testing.T) {
	for _, kind := range testdb.Kinds {
		t.Run(kind, func(t *testing.T) {
			s := newTestServerOn(t, kind, Config{})
			for _, bad := range []string{"0.0015", "1.0005", "600.0004", "1000.0005", "86400.0001", "31622399.9995"} {
				code, _, b := call(t, s, "POST", "/jobs", "", []byte(`{"kind":"k","timeout_seconds":`+bad+`}`))
				if code != http.StatusBadRequest || !strings.Contains(string(b), "invalid timeout_seconds: ") ||
					!strings.Contains(string(b), "not a whole number of milliseconds") {
					t.Errorf("timeout_seconds %s: %d %s; want 400: not a whole number of milliseconds", bad, code, b)
				}
			}
			if code, _, b := call(t, s, "GET", "/jobs", "", nil); code != http.StatusOK || !strings.Contains(string(b), `"jobs":[]`) {
				t.Errorf("jobs after the refused enqueues: %d %s; want none", code, b)
			}
			for _, ok := range []string{"0.001", "0.3", "1.001", "600.001", "4000.123", "86399.999", "31622399.999", "31622400"} {
				code, _, b := call(t, s, "POST", "/jobs", "", []byte(`{"kind":"k","timeout_seconds":`+ok+`}`))
				if code != http.StatusCreated || !strings.Contains(string(b), fmt.Sprintf(`"timeout_seconds":%s,`, ok)) {
					t.Errorf("timeout_seconds %s: %d %s; want 201 with it as given", ok, code, b)
				}
			}
			// As Go's Duration.Seconds writes whole milliseconds (the CLI's
			// --timeout through a server): 1.1179999999999999 for 1118 ms.
			for _, d := range []time.Duration{1118 * time.Millisecond, 1140 * time.Millisecond, 86399999 * time.Millisecond} {
				code, _, b := call(t, s, "POST", "/jobs", "", []byte(fmt.Sprintf(`{"kind":"k","timeout_seconds":%v}`, d.Seconds())))
				var j drover.Job
				if code != http.StatusCreated || json.Unmarshal(b, &j) != nil || j.Timeout != d {
					t.Errorf("timeout_seconds %v (%s): %d %s; want 201 with %s", d.Seconds(), d, code, b, d)
				}
			}
		})
	}
}
