package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/localaws"
)

func TestStreamFlag(t *testing.T) {
	var s streamFlags
	for _, v := range []string{"words", "clicks:4"} {
		if err := s.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(streamFlags{{"words", 1}, {"clicks", 4}}, s, cmp.AllowUnexported(streamSpec{})); diff != "" {
		t.Errorf("streams (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", ":2", "words:0", "words:x"} {
		if err := s.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted", bad)
		}
	}
}

// notify is an io.Writer that closes ready once a line has been written.
type notify struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	line  string
	ready chan struct{}
}

func (n *notify) Write(p []byte) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	had := strings.Contains(n.buf.String(), n.line)
	n.buf.Write(p)
	if !had && strings.Contains(n.buf.String(), n.line) {
		close(n.ready)
	}
	return len(p), nil
}

func (n *notify) String() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.buf.String()
}

// repoRoot returns the repository's root, whose package.json pins the
// local servers.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// startRun runs the command with o until it prints that its servers run,
// and returns what it prints and stop, which ends the run and returns
// run's error; stop is called at the end of t if not before. If run
// returns before its servers run, startRun returns run's error and a nil
// stop.
func startRun(t *testing.T, o options) (out *notify, stop func() error, err error) {
	t.Helper()
	out = &notify{line: "# running", ready: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, o, out) }()
	select {
	case <-out.ready:
	case err := <-done:
		cancel()
		return out, nil, err
	}
	stop = sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	t.Cleanup(func() { stop() })
	return out, stop, nil
}

// kinesisEndpoint returns the Kinesis endpoint that out's export line
// names, and whether there is one.
func kinesisEndpoint(out string) (string, bool) {
	m := regexp.MustCompile(`export WEIR_KINESIS_ENDPOINT=(\S+)\n`).FindStringSubmatch(out)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// TestRun starts the servers with a stream, checks the printed endpoint
// serves that stream, and stops them.
func TestRun(t *testing.T) {
	o := options{opts: localaws.Options{Kinesis: true, DynamoDB: true, Dir: repoRoot(t)}}
	if err := o.streams.Set("words:2"); err != nil {
		t.Fatal(err)
	}
	out, stop, err := startRun(t, o)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	endpoint, ok := kinesisEndpoint(out.String())
	if !ok || !strings.Contains(out.String(), "export WEIR_DYNAMODB_ENDPOINT=http://127.0.0.1:") {
		t.Fatalf("endpoints not printed:\n%s", out)
	}
	kc := kinesis.New(kinesis.Options{
		Region: localaws.Region, BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	shards, err := kc.ListShards(t.Context(), &kinesis.ListShardsInput{StreamName: aws.String("words")})
	if err != nil {
		t.Fatal(err)
	}
	if len(shards.Shards) != 2 {
		t.Errorf("stream words has %d shards, want 2", len(shards.Shards))
	}
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// TestRunIgnoresEndpointsInEnvironment runs the command in a shell that
// still holds the export lines of an earlier run (whose server is gone):
// it starts a server of its own and prints its endpoint, rather than
// printing the stale one again and starting nothing.
func TestRunIgnoresEndpointsInEnvironment(t *testing.T) {
	const stale = "http://127.0.0.1:1"
	t.Setenv(localaws.EnvKinesisEndpoint, stale)
	out, stop, err := startRun(t, options{opts: localaws.Options{Kinesis: true, Dir: repoRoot(t)}})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	if endpoint, ok := kinesisEndpoint(out.String()); !ok || endpoint == stale {
		t.Errorf("with %s=%s in the environment, weir-local printed:\n%s\nwant the endpoint of a server it started",
			localaws.EnvKinesisEndpoint, stale, out)
	}
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// TestRunAgainOnData runs the command twice with the same -data and
// -stream, as a developer runs it each morning: the second run finds the
// stream kept in -data and goes on with it, rather than failing because
// it exists; a stream kept with another number of shards is refused,
// naming the fix.
func TestRunAgainOnData(t *testing.T) {
	root, data := repoRoot(t), t.TempDir()
	start := func(stream string) (string, error) {
		t.Helper()
		o := options{opts: localaws.Options{Kinesis: true, DataDir: data, Dir: root}}
		if err := o.streams.Set(stream); err != nil {
			t.Fatal(err)
		}
		out, stop, err := startRun(t, o)
		if err == nil {
			err = stop()
		}
		return out.String(), err
	}
	if out, err := start("words:2"); err != nil {
		t.Fatalf("first run: %v\n%s", err, out)
	}
	out, err := start("words:2")
	if err != nil {
		t.Fatalf("second run on the same -data: %v\n%s", err, out)
	}
	if !strings.Contains(out, "# stream words: 2 shard(s), kept in -data") {
		t.Errorf("second run printed:\n%s\nwant it to say the stream was kept", out)
	}
	if out, err := start("words:3"); err == nil || !strings.Contains(err.Error(), "has 2 shard(s), not 3") {
		t.Errorf("run asking for 3 shards of a kept 2-shard stream: %v\n%s\nwant an error naming both counts", err, out)
	}
}
