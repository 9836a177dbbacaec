package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/localaws"
)

// envMain, set to "1", makes the test binary run main instead of the tests
// (TestBadFlagsExit2).
const envMain = "FLEETCOUNT_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envMain) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestDemo runs the example with no flags but a short batch interval: it
// starts its own servers, puts 1000 records and must count them all before
// it exits.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	o, err := parseFlags([]string{"-batch", "200ms"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(t.Context(), o, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "counted 1000 of 1000 records in 16 keys\n") {
		t.Errorf("the demo did not count its 1000 records in 16 keys; output:\n%s", out.String())
	}
}

// TestDemoTwiceOnRunningServers runs the demo twice on the same running
// servers, as it runs with weir-local's WEIR_*_ENDPOINT variables set: each
// run makes a stream of its own and must count its own records, not meet
// the tables of the run before (whose checkpoints name another stream's
// records, and whose counts are not this run's).
func TestDemoTwiceOnRunningServers(t *testing.T) {
	env := localaws.ForTest(t, localaws.Options{Kinesis: true, DynamoDB: true})
	t.Setenv(localaws.EnvKinesisEndpoint, env.KinesisEndpoint)
	t.Setenv(localaws.EnvDynamoDBEndpoint, env.DynamoDBEndpoint)
	for i, put := range []string{"200", "300"} {
		var out bytes.Buffer
		o, err := parseFlags([]string{"-batch", "200ms", "-put", put}, &out)
		if err != nil {
			t.Fatal(err)
		}
		if err := run(t.Context(), o, &out); err != nil {
			t.Fatalf("run %d: %v\noutput:\n%s", i+1, err, out.String())
		}
		if want := "counted " + put + " of " + put + " records in 16 keys\n"; !strings.Contains(out.String(), want) {
			t.Errorf("run %d did not count its %s records in 16 keys; output:\n%s", i+1, put, out.String())
		}
	}
}

// TestOneWorker runs one worker on a stream of local servers (started by
// the test) whose records have keys with and without commas, until the
// table holds every key's count, then stops it (a drain, as SIGTERM does):
// the table must hold exactly the count of each key, and the worker's name
// must be kept in its state directory.
func TestOneWorker(t *testing.T) {
	env := localaws.ForTest(t, localaws.Options{Kinesis: true, DynamoDB: true})
	creds, err := env.AWSConfig().Credentials.Retrieve(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_REGION", localaws.Region) // what run's default AWS configuration reads
	t.Setenv("AWS_ACCESS_KEY_ID", creds.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", creds.SecretAccessKey)
	t.Setenv("AWS_PROFILE", "")

	want := map[string]int64{}
	var data [][]byte
	for i := range 600 {
		var d string
		switch i % 3 {
		case 0:
			d = fmt.Sprintf("k%d,%d", i%7, i) // key k0 to k6
		case 1:
			d = fmt.Sprintf("plain%d", i%5) // no comma: the whole data
		default:
			d = fmt.Sprintf("k%d,x,y", i%7) // up to the first comma
		}
		key, _, _ := strings.Cut(d, ",")
		want[key]++
		data = append(data, []byte(d))
	}
	// The stream exists already: -shards leaves it as it is.
	if err := env.CreateStream(t.Context(), "events", 3); err != nil {
		t.Fatal(err)
	}
	if err := env.PutRecords(t.Context(), "events", data, nil); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	out := newSyncBuffer()
	o, err := parseFlags([]string{"-stream", "events", "-app", "counter", "-table", "counts", "-shards", "3",
		"-kinesis-endpoint", env.KinesisEndpoint, "-dynamodb-endpoint", env.DynamoDBEndpoint,
		"-state", state, "-repartition-shards", "2", "-batch", "200ms", "-checkpoint", "200ms"}, out)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- run(ctx, o, out) }()

	deadline := time.Now().Add(time.Minute) // a failure guard, not an assertion
	table := &countTable{db: env.DynamoDB(), name: "counts"}
	var got map[string]int64
	for !cmp.Equal(want, got) {
		select {
		case err := <-done:
			t.Fatalf("the worker stopped before counting every record: %v\noutput:\n%s", err, out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("table not equal to the truth after a minute (-want +got):\n%s", cmp.Diff(want, got))
		}
		got = scanMap(t, table)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("run after the drain: %v\noutput:\n%s", err, out.String())
	}
	if diff := cmp.Diff(want, scanMap(t, table)); diff != "" {
		t.Errorf("table after the drain (-want +got):\n%s", diff)
	}
	name, err := os.ReadFile(filepath.Join(state, "worker"))
	if err != nil || !strings.Contains(out.String(), "worker "+strings.TrimSpace(string(name))+" counting") {
		t.Errorf("worker name in %s: %q, %v; want the one the worker printed:\n%s", state, name, err, out.String())
	}
}

// TestMissingStreamCreatesNothing runs a worker on a stream that does not
// exist (a mistyped -stream): it fails naming the stream and the flag,
// before it creates the counts table or the intermediate stream, which on
// a real account would be left behind, and paid for.
func TestMissingStreamCreatesNothing(t *testing.T) {
	env := localaws.ForTest(t, localaws.Options{Kinesis: true, DynamoDB: true})
	o, err := parseFlags([]string{"-stream", "evnets", "-app", "counter", "-table", "counts",
		"-kinesis-endpoint", env.KinesisEndpoint, "-dynamodb-endpoint", env.DynamoDBEndpoint,
		"-state", t.TempDir()}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	err = count(t.Context(), o, env.AWSConfig(), slog.New(slog.DiscardHandler), io.Discard, false)
	if err == nil || !strings.Contains(err.Error(), `stream "evnets" not found`) || !strings.Contains(err.Error(), "-stream") {
		t.Fatalf("count = %v, want an error naming the stream and -stream", err)
	}
	streams, err := env.Kinesis().ListStreams(t.Context(), &kinesis.ListStreamsInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(streams.StreamNames) > 0 {
		t.Errorf("streams %v created for a stream that does not exist", streams.StreamNames)
	}
	tables, err := env.DynamoDB().ListTables(t.Context(), &dynamodb.ListTablesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tables.TableNames) > 0 {
		t.Errorf("tables %v created for a stream that does not exist", tables.TableNames)
	}
}

// TestUnreachableEndpointNamesTheFlag runs a worker with an endpoint no
// server listens on (a closed port on 127.0.0.1), for Kinesis and for
// DynamoDB: the error names the flag to check, not only the SDK's error.
func TestUnreachableEndpointNamesTheFlag(t *testing.T) {
	env := localaws.ForTest(t, localaws.Options{Kinesis: true, DynamoDB: true})
	if err := env.CreateStream(t.Context(), "events", 1); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	for _, flag := range []string{"-kinesis-endpoint", "-dynamodb-endpoint"} {
		endpoints := map[string]string{"-kinesis-endpoint": env.KinesisEndpoint, "-dynamodb-endpoint": env.DynamoDBEndpoint}
		endpoints[flag] = closed
		o, err := parseFlags([]string{"-stream", "events", "-app", "counter", "-state", t.TempDir(),
			"-kinesis-endpoint", endpoints["-kinesis-endpoint"], "-dynamodb-endpoint", endpoints["-dynamodb-endpoint"]}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		err = count(t.Context(), o, env.AWSConfig(), slog.New(slog.DiscardHandler), io.Discard, false)
		if err == nil || !strings.Contains(err.Error(), "check "+flag) {
			t.Errorf("count with %s %s = %v, want an error naming %s", flag, closed, err, flag)
		}
	}
}

// scanMap returns the table's counts by key.
func scanMap(t *testing.T, table *countTable) map[string]int64 {
	t.Helper()
	items, err := table.scan(t.Context())
	var missing *types.ResourceNotFoundException
	if errors.As(err, &missing) {
		return nil // not created yet
	}
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int64{}
	for _, it := range items {
		m[it.Key] = it.Count
	}
	return m
}

// syncBuffer is a bytes.Buffer the test reads while run writes to it.
type syncBuffer struct {
	syncWriter // writes to b
	b          bytes.Buffer
}

func newSyncBuffer() *syncBuffer {
	s := &syncBuffer{}
	s.w = &s.b
	return s
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestParseFlags checks that each bad flag is reported, naming the flag
// and what to do.
func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-kinesis-endpoint", "http://127.0.0.1:1"}, "-kinesis-endpoint given without -stream: name the stream"},
		{[]string{"-stream", "s", "-dynamodb-endpoint", "localhost:1"}, `-dynamodb-endpoint "localhost:1": must be an http or https URL`},
		{[]string{"-app", "a"}, `-app "a": must be 3 to 100`},
		{[]string{"-table", "x/y"}, `-table "x/y": must be 3 to 255`},
		{[]string{"-repartition-shards", "0"}, "-repartition-shards 0: must be >= 1"},
		{[]string{"-stream", "s", "-shards", "2"}, "-shards 2 with a stream on AWS: create the stream"},
		{[]string{"-batch", "1500us"}, "-batch 1.5ms: must be a whole number of milliseconds, such as 2ms"},
		{[]string{"-put", "-1"}, "-put -1: must be >= 0"},
		{[]string{"-checkpoint", "-1s"}, "-checkpoint -1s: must be >= 0"},
		{[]string{"-lease-duration", "-1s"}, "-lease-duration -1s: must be >= 0"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		_, err := parseFlags(tc.args, new(bytes.Buffer))
		if !errors.Is(err, errInvalidFlags) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseFlags(%q) = %v, want an invalid-flags error containing %q", tc.args, err, tc.want)
		}
	}
	o, err := parseFlags([]string{"-app", "orders"}, new(bytes.Buffer))
	if err != nil || o.table != "orders-counts" || o.repartitionShards != 4 {
		t.Errorf("parseFlags(-app orders) = %+v, %v; want table orders-counts and 4 repartition shards", o, err)
	}
}

// TestBadFlagsExit2 runs main with a bad flag: it must exit with status 2
// and say which flag is wrong on stderr.
func TestBadFlagsExit2(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-repartition-shards", "0")
	cmd.Env = append(os.Environ(), envMain+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr.String(), "-repartition-shards 0: must be >= 1") {
		t.Errorf("fleetcount -repartition-shards 0: %v, stderr %q; want exit status 2 naming the flag", err, stderr.String())
	}
}
