package cli

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// An error answer that is not a drover server's says what answered, not a
// bare "HTTP 400": --server http:// given an https port got Go's TLS server's
// "Client sent an HTTP request to an HTTPS server." and printed only the
// status, and a proxy's error page only its status too.
func TestAnswerNotFromDroverSaysWhatAnswered(t *testing.T) {
	tlsSrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake it refuses
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	host := strings.TrimPrefix(tlsSrv.URL, "https://")
	code, _, stderr := run(t, "--server", "http://"+host, "jobs", "list")
	if code == 0 || !strings.Contains(stderr, "HTTP request to an HTTPS server") || !strings.Contains(stderr, "give --server https://"+host) {
		t.Errorf("--server http:// at an https port: exit %d, stderr %q; want the TLS server's answer and https:// offered", code, stderr)
	}

	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("<html><head><title>502 Bad Gateway</title></head>\n<body>nginx</body></html>\n"))
	}))
	defer proxy.Close()
	code, _, stderr = run(t, "--server", proxy.URL, "jobs", "show", "1")
	if code == 0 || !strings.Contains(stderr, "HTTP 502") || !strings.Contains(stderr, "502 Bad Gateway") || !strings.Contains(stderr, "not a drover server's answer") {
		t.Errorf("a proxy's 502 page: exit %d, stderr %q; want its status, its first line and that it is not drover's", code, stderr)
	}
	if strings.Contains(stderr, "https://") {
		t.Errorf("a proxy's 502 page offered https: %q", stderr)
	}
}
