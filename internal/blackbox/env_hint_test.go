package blackbox

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestRefusedValueFromTheEnvironmentIsNamed: a value a command refuses that
// came from a DROVER_* variable, not the command line, is named as coming
// from it (the value itself is not repeated: it may be a token). The error
// named the field alone ("invalid database_url"), pointing at a
// --database-url the user never typed. The same value given as the flag is
// not attributed to the environment, even with the variable set too.
func TestRefusedValueFromTheEnvironmentIsNamed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env      string
		args     []string
		wantHint bool
	}{
		{"DROVER_DATABASE_URL=mysql://db", []string{"jobs", "list"}, true},
		{"DROVER_LOG_LEVEL=loud", []string{"jobs", "list"}, true},
		{"DROVER_ADDR=nohostport", []string{"server"}, true},
		{"DROVER_SERVER=ftp://x", []string{"jobs", "list"}, true},
		{"DROVER_ADDR=nohostport", []string{"server", "--addr", "alsobad"}, false},
		{"", []string{"server", "--addr", "nohostport"}, false},
	} {
		cmd := exec.Command(droverBin, tc.args...)
		cmd.Env = cleanEnv()
		if tc.env != "" {
			cmd.Env = append(cmd.Env, tc.env)
		}
		cmd.Dir = t.TempDir() // no ./drover.db left behind
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%s drover %s: %v, want exit 2\n%s", tc.env, strings.Join(tc.args, " "), err, out)
			continue
		}
		name, _, _ := strings.Cut(tc.env, "=")
		hint := "(from " + name + " in the environment)"
		if got := strings.Contains(string(out), hint); got != tc.wantHint || (tc.env == "" && strings.Contains(string(out), "environment")) {
			t.Errorf("%s drover %s: %q; want the hint %q: %v", tc.env, strings.Join(tc.args, " "), out, hint, tc.wantHint)
		}
	}
}
