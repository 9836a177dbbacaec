package main

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"
)

// silentEndpoint is an endpoint that takes connections and never answers.
func silentEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// TestSilentEndpointFails runs list and replay against an endpoint that
// takes the connection and never answers: each attempt is bounded
// (attemptTimeout, shortened here), so the command fails, naming the
// endpoint, instead of waiting for ever (the SDK's default client bounds
// the dial only).
func TestSilentEndpointFails(t *testing.T) {
	localCredentials(t)
	defer func(d time.Duration) { attemptTimeout = d }(attemptTimeout)
	attemptTimeout = 100 * time.Millisecond
	f := newFixture(t)
	ep := silentEndpoint(t)
	for _, args := range [][]string{
		{"deadletters", "list", "-table", "letters", "-table-endpoint", ep, "-region", "us-east-1"},
		{"deadletters", "replay", "-dir", f.dir, "-stream", f.stream, "-all", "-endpoint", ep, "-region", "us-east-1"},
	} {
		err := run(t.Context(), args, &bytes.Buffer{}, awsKinesis)
		if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(ep, "http://")) {
			t.Errorf("%v against a silent endpoint: %v, want an error naming it", args[:2], err)
		}
	}
}
