package blackbox

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/testcert"
	"github.com/drover-dev/drover/internal/testdb"
)

// TestCACertTrustsAServersOwnCertificate: `drover server --tls-cert/--tls-key`
// with a certificate of its own CA is reached by the jobs commands and a
// remote worker given that CA with --cacert, as curl's --cacert and the
// Temporal CLI's --tls-ca-path do. Without it they fail on the certificate
// (the only way was SSL_CERT_FILE for the whole process). A --cacert that
// would not be used, or holds no certificate, is refused naming cacert.
func TestCACertTrustsAServersOwnCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile, pool := testcert.SelfSigned(t)
	caFile := certFile // the certificate is its own CA
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	url := testdb.URL(t, "sqlite")
	api := make(chan string, 1)
	startWatched(t, func(line string) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "API:" {
			api <- f[1]
		}
	}, "server", "--addr", "127.0.0.1:0", "--database-url", url, "--tls-cert", certFile, "--tls-key", keyFile, "--log-level", "warn")
	var base string
	select {
	case base = <-api:
	case <-time.After(30 * time.Second):
		t.Fatal("drover server did not print its address within 30s")
	}
	if !strings.HasPrefix(base, "https://") {
		t.Fatalf("drover server with --tls-cert printed API %q, want https://", base)
	}

	drover := func(args ...string) (int, string, string) {
		cmd := exec.Command(droverBin, args...)
		cmd.Env = cleanEnv()
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0, stdout.String(), stderr.String()
		case errors.As(err, &ee):
			return ee.ExitCode(), stdout.String(), stderr.String()
		}
		t.Fatal(err)
		return 0, "", ""
	}

	// Trusted through --cacert: an enqueue, then a remote worker runs it.
	code, out, errOut := drover("jobs", "enqueue", "echo", "--args", `{"n":7}`, "--server", base, "--cacert", caFile, "-o", "json")
	if code != 0 {
		t.Fatalf("jobs enqueue --server %s --cacert: exit %d: %s", base, code, errOut)
	}
	var job struct{ ID int64 }
	if err := json.Unmarshal([]byte(out), &job); err != nil || job.ID == 0 {
		t.Fatalf("jobs enqueue -o json: %q (%v)", out, err)
	}
	startWatched(t, nil, "worker", "--server", base, "--cacert", caFile, "--log-level", "warn")
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := hc.Get(base + "/jobs/" + strconv.FormatInt(job.ID, 10))
		if err != nil {
			t.Fatal(err)
		}
		var j struct{ Status string }
		err = json.NewDecoder(resp.Body).Decode(&j)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if j.Status == "succeeded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d is %s 30s after a remote worker with --cacert started, want succeeded", job.ID, j.Status)
		}
		time.Sleep(50 * time.Millisecond) // the job's row is the only signal
	}

	// Not trusted without it.
	if code, _, errOut := drover("jobs", "list", "--server", base); code != 1 || !strings.Contains(errOut, "certificate") {
		t.Errorf("jobs list --server %s without --cacert: exit %d, %q; want 1 and a certificate error", base, code, errOut)
	}
	// Refused, naming cacert.
	for _, args := range [][]string{
		{"jobs", "list", "--server", base, "--cacert", notPEM},
		{"jobs", "list", "--server", base, "--cacert", filepath.Join(dir, "missing.pem")},
		{"jobs", "list", "--server", base, "--cacert", ""},
		{"jobs", "list", "--server", strings.Replace(base, "https://", "http://", 1), "--cacert", caFile},
		{"jobs", "list", "--database-url", url, "--cacert", caFile},
		{"migrate", "status", "--database-url", url, "--cacert", caFile},
	} {
		if code, _, errOut := drover(args...); code != 2 || !strings.Contains(errOut, "invalid cacert") {
			t.Errorf("drover %s: exit %d, %q; want 2 naming cacert", strings.Join(args, " "), code, errOut)
		}
	}
}
