package drover_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/drover-dev/drover"
)

// A remote worker whose server URL answers with a redirect (an http→https
// proxy, a moved host) says so instead of following it: Go's client followed
// a 301 with a GET, which the server refused 405 without saying why, and a 307
// or 308 took the worker's token and its reports to whatever host the
// redirect named.
func TestRemoteWorkerDoesNotFollowARedirect(t *testing.T) {
	for _, code := range []int{http.StatusMovedPermanently, http.StatusTemporaryRedirect} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			var elsewhere atomic.Int32
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				elsewhere.Add(1)
				http.Error(w, "not a drover server", http.StatusNotFound)
			}))
			defer other.Close()
			claims := make(chan struct{}, 100)
			proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case claims <- struct{}{}:
				default:
				}
				http.Redirect(w, r, other.URL+r.URL.Path, code)
			}))
			defer proxy.Close()

			logs := &logBuffer{}
			ws := drover.NewWorkers()
			drover.Register(ws, "k", func(context.Context, *drover.Job, struct{}) (any, error) { return nil, nil })
			cfg := fastWorkerConfig(ws)
			cfg.Logger = logs.logger()
			startRemoteWorker(t, drover.RemoteConfig{URL: proxy.URL, Token: "secret", WaitSeconds: -1}, cfg)
			// Two claims: the first one's answer was taken, redirect and all.
			<-claims
			<-claims
			if n := elsewhere.Load(); n != 0 {
				t.Errorf("the redirect's target got %d requests, want none", n)
			}
			waitFor(t, "a log line naming the redirect", func() bool {
				return strings.Contains(logs.String(), "a redirect to") && strings.Contains(logs.String(), other.URL)
			})
		})
	}
}

// A server URL that does not parse is refused without being echoed: what is
// before its '@' may be a password.
func TestRemoteWorkerURLErrorHidesCredentials(t *testing.T) {
	_, err := drover.NewRemoteWorker(drover.RemoteConfig{URL: "http://user:s3cret@127.0.0.1:port"}, fastWorkerConfig(drover.NewWorkers()))
	var ve *drover.ValidationError
	if !errors.As(err, &ve) || ve.Field != "server" {
		t.Fatalf("NewRemoteWorker: %v, want a ValidationError on server", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error shows the password: %v", err)
	}
}
