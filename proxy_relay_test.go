package drover_test

import (
	"bytes"
	"io"
	"net/http"
)

// relayed is an upstream's answer to a request a test's proxy passed on.
type relayed struct {
	status int
	header http.Header
	body   []byte
}

// relay sends r, whose body the proxy read into body (read it first: the
// server then sees a client that goes away), to upstream and reads the
// answer. On a failure it answers 502 itself and reports false.
func relay(w http.ResponseWriter, r *http.Request, upstream string, body []byte) (relayed, bool) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return relayed{}, false
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return relayed{}, false
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return relayed{}, false
	}
	return relayed{resp.StatusCode, resp.Header, out}, true
}

// write sends the answer on to the proxy's client.
func (a relayed) write(w http.ResponseWriter) {
	for k, v := range a.header {
		if k != "Content-Length" { // the body may have been rewritten
			w.Header()[k] = v
		}
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}
