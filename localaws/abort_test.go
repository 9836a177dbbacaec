package localaws

import (
	"context"
	"net"
	"net/url"
	"testing"
)

// TestServersSurviveAbortedRequests checks that a client hanging up in the
// middle of a request (what a cancelled context does) does not kill
// kinesalite or dynalite: both rethrow that error unless the launcher
// catches it.
func TestServersSurviveAbortedRequests(t *testing.T) {
	env := ForTest(t, Options{Kinesis: true, DynamoDB: true})
	ctx := context.Background()
	for _, endpoint := range []string{env.KinesisEndpoint, env.DynamoDBEndpoint} {
		u, err := url.Parse(endpoint)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			conn, err := net.Dial("tcp", u.Host)
			if err != nil {
				t.Fatal(err)
			}
			// Promise a body, send part of it, hang up.
			_, err = conn.Write([]byte("POST / HTTP/1.1\r\nHost: " + u.Host +
				"\r\nContent-Type: application/x-amz-json-1.1\r\nContent-Length: 100\r\n\r\n{\"Stre"))
			if err != nil {
				t.Fatal(err)
			}
			conn.Close()
		}
	}
	// Both servers still answer.
	if err := env.CreateStream(ctx, "after-abort", 1); err != nil {
		t.Errorf("kinesalite after aborted requests: %v", err)
	}
	if _, err := env.DynamoDB().ListTables(ctx, nil); err != nil {
		t.Errorf("dynalite after aborted requests: %v", err)
	}
}
