package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/localaws/faults"
	"github.com/weirstream/weir/sink/deadletter"
	weirkinesis "github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

var servers = localaws.NewShared(localaws.Options{Kinesis: true, DynamoDB: true})

func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }

// fixture is a dead-letter directory with four letters and a stream of two
// shards to replay them into.
type fixture struct {
	dir, stream string
	c           *kinesis.Client
	ids         []string // the letters' names in the store, by batch
	store       []string // the flags naming the dead-letter store
	batches     [][]stream.DeadLetter
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := servers.Env(t)
	f := &fixture{dir: filepath.Join(t.TempDir(), "dead"), stream: localaws.UniqueName(t), c: env.Kinesis()}
	f.store = []string{"-dir", f.dir}
	if err := env.CreateStream(t.Context(), f.stream, 2); err != nil {
		t.Fatal(err)
	}
	dead, err := deadletter.Open(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	kr := func(data, key string) []byte {
		b, err := json.Marshal(weirkinesis.Record{Data: []byte(data), PartitionKey: key, SequenceNumber: "49590338271490256608559692538361571095921575989136588802"})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	batches := [][]stream.DeadLetter{
		{{Time: 1000, Output: 0, Index: 0, Record: kr("a", "k1"), Encoding: "json", Err: "boom"},
			{Time: 1000, Output: 0, Index: 1, Record: kr("b", "k2"), Encoding: "json", Err: "panic: kaboom"}},
		{{Time: 2000, Output: 1, Index: 0, Record: []byte("c"), Encoding: "raw", Err: "boom"}},
		{{Time: 3000, Output: 0, Index: 0, Record: kr("d", "k4"), Encoding: "json", Err: "boom"}},
	}
	f.batches = batches
	for _, b := range batches {
		if err := dead.Quarantine(t.Context(), b); err != nil {
			t.Fatal(err)
		}
	}
	f.ids = []string{"1000-0-0", "1000-0-1", "2000-1-0", "3000-0-0"}
	return f
}

// cmd runs the command line args against the local Kinesis.
func (f *fixture) cmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	client := func(context.Context, string, string) (*kinesis.Client, error) { return f.c, nil }
	err := run(t.Context(), args, &out, client)
	return out.String(), err
}

func (f *fixture) replay(t *testing.T, ids ...string) string {
	t.Helper()
	args := append([]string{"deadletters", "replay", "-stream", f.stream}, f.store...)
	if len(ids) == 0 {
		args = append(args, "-all")
	}
	for _, id := range ids {
		args = append(args, "-id", id)
	}
	out, err := f.cmd(t, args...)
	if err != nil {
		t.Fatalf("replay %v: %v\n%s", ids, err, out)
	}
	return out
}

// records returns every record of the stream, as "partitionkey=data",
// sorted by key.
func (f *fixture) records(t *testing.T) []string {
	t.Helper()
	ctx := t.Context()
	shards, err := f.c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: &f.stream})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sh := range shards.Shards {
		it, err := f.c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: &f.stream, ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		for iter := it.ShardIterator; iter != nil; {
			res, err := f.c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res.Records {
				got = append(got, aws.ToString(r.PartitionKey)+"="+string(r.Data))
			}
			if len(res.Records) == 0 {
				break
			}
			iter = res.NextShardIterator
		}
	}
	slices.Sort(got)
	return got
}

// TestReplayOnce checks list and replay: chosen letters are put once, a
// letter replayed is never put again, and list says where each went.
func TestReplayOnce(t *testing.T) {
	f := newFixture(t)
	out, err := f.cmd(t, "deadletters", "list", "-dir", f.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range f.ids {
		if !strings.Contains(out, id) {
			t.Errorf("list does not show %s:\n%s", id, out)
		}
	}
	f.replay(t, "1000-0-1")
	if diff := cmp.Diff([]string{"k2=b"}, f.records(t)); diff != "" {
		t.Errorf("after replaying one (-want +got):\n%s", diff)
	}
	f.replay(t)
	out = f.replay(t)
	if !strings.Contains(out, "1000-0-0: already replayed to "+f.stream) {
		t.Errorf("a third replay says:\n%s\nwant every letter already replayed", out)
	}
	want := []string{"2000-1-0=c", "k1=a", "k2=b", "k4=d"}
	if diff := cmp.Diff(want, f.records(t)); diff != "" {
		t.Errorf("stream after replaying all, twice (-want +got):\n%s", diff)
	}
	out, err = f.cmd(t, "deadletters", "list", "-dir", f.dir)
	if err != nil || strings.Count(out, "to "+f.stream+" shardId-") != 4 {
		t.Errorf("list after the replays (%v):\n%s\nwant all four replayed", err, out)
	}
	if _, err := f.cmd(t, "deadletters", "replay", "-dir", f.dir, "-stream", f.stream, "-id", "9-9-9"); err == nil || !strings.Contains(err.Error(), "no letter 9-9-9") {
		t.Errorf("replay of an unknown letter = %v, want an error naming it", err)
	}
}

// TestReplayCrashWindows checks the crash windows of a replay: a crash
// after it journaled a put it never made (the record is put), a crash after
// the put and before it journaled it done (the record is found in the
// stream and not put again), and a journal line the crash cut.
func TestReplayCrashWindows(t *testing.T) {
	f := newFixture(t)
	// A record in each shard first: kinesalite never answers an
	// AT_TIMESTAMP GetShardIterator on an empty shard (mhart/kinesalite
	// issue 84), which Kinesis answers with an iterator at the end.
	for _, hashKey := range []string{"0", "340282366920938463463374607431768211455"} {
		if _, err := f.c.PutRecord(t.Context(), &kinesis.PutRecordInput{StreamName: &f.stream, Data: []byte("x"),
			PartitionKey: aws.String("filler"), ExplicitHashKey: aws.String(hashKey)}); err != nil {
			t.Fatal(err)
		}
	}
	d, err := os.OpenFile(filepath.Join(f.dir, journalName), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	j := &journal{f: d}
	now := func() journalEntry { return journalEntry{State: statePutting, Stream: f.stream, At: time.Now()} }
	e := now()
	e.ID = "1000-0-0" // crashed before its put
	if err := j.add(e); err != nil {
		t.Fatal(err)
	}
	e = now()
	e.ID = "1000-0-1" // crashed after its put
	if err := j.add(e); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.PutRecord(t.Context(), &kinesis.PutRecordInput{StreamName: &f.stream, Data: []byte("b"), PartitionKey: aws.String("k2")}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.WriteString(`{"id":"3000-0-0","state":"do`); err != nil { // cut by the crash
		t.Fatal(err)
	}
	d.Close()

	out := f.replay(t)
	if !strings.Contains(out, "1000-0-1: found in "+f.stream) {
		t.Errorf("replay says:\n%s\nwant 1000-0-1 found in the stream", out)
	}
	want := []string{"2000-1-0=c", "filler=x", "filler=x", "k1=a", "k2=b", "k4=d"}
	if diff := cmp.Diff(want, f.records(t)); diff != "" {
		t.Errorf("stream after the replay (-want +got):\n%s", diff)
	}
	f.replay(t)
	if diff := cmp.Diff(want, f.records(t)); diff != "" {
		t.Errorf("stream after a second replay (-want +got):\n%s", diff)
	}
}

// TestReplayRefusedPut checks, for a directory and a table, that a put
// Kinesis refuses (a stream that does not exist) leaves its letter free to
// replay: a replay into the right stream then puts it, once, instead of
// failing for good while looking for it in the stream that does not
// exist.
func TestReplayRefusedPut(t *testing.T) {
	for _, store := range []string{"dir", "table"} {
		t.Run(store, func(t *testing.T) {
			f := newFixture(t)
			if store == "table" {
				f, _ = newTableFixture(t)
			}
			args := append([]string{"deadletters", "replay", "-stream", f.stream + "-missing", "-id", f.ids[0]}, f.store...)
			out, err := f.cmd(t, args...)
			var notFound *types.ResourceNotFoundException
			if !errors.As(err, &notFound) {
				t.Fatalf("replay into a stream that does not exist = %v, want ResourceNotFoundException\n%s", err, out)
			}
			f.replay(t)
			want := []string{f.ids[2] + "=c", "k1=a", "k2=b", "k4=d"}
			if diff := cmp.Diff(want, f.records(t)); diff != "" {
				t.Errorf("stream after replaying all (-want +got):\n%s", diff)
			}
		})
	}
}

// noRegion leaves the AWS SDK no region to find: none in the environment
// nor in a shared config file.
func noRegion(t *testing.T) {
	t.Helper()
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
}

// TestNoRegion runs the tool with no region anywhere (flag, environment,
// shared config) and no endpoint: the error names -region and AWS_REGION
// rather than the SDK's "Missing Region" (no call is sent either way).
func TestNoRegion(t *testing.T) {
	noRegion(t)
	err := run(t.Context(), []string{"deadletters", "list", "-table", "letters"}, &bytes.Buffer{}, awsKinesis)
	if err == nil || !strings.Contains(err.Error(), "pass -region, or set AWS_REGION") {
		t.Errorf("list -table without a region = %v, want an error naming -region and AWS_REGION", err)
	}
}

// TestReplayTableEndpointRefused: replay -table with -endpoint and no
// -table-endpoint is refused, naming -table-endpoint: -endpoint is
// Kinesis's (list's is the table's), and the table's calls would go to
// AWS with the environment's credentials. No call is sent.
func TestReplayTableEndpointRefused(t *testing.T) {
	noRegion(t)
	var out bytes.Buffer
	args := []string{"deadletters", "replay", "-table", "letters", "-stream", "s", "-all", "-endpoint", "http://127.0.0.1:1"}
	err := run(t.Context(), args, &out, awsKinesis)
	if err == nil || !strings.Contains(err.Error(), "-endpoint http://127.0.0.1:1 is Kinesis's") || !strings.Contains(err.Error(), "-table-endpoint") {
		t.Errorf("replay -table -endpoint = %v, want refused naming -table-endpoint", err)
	}
}

// TestUsage checks that a bad command line is refused with the usage.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"deadletters"},
		{"deadletters", "list"},
		{"deadletters", "replay", "-dir", "d"},
		{"deadletters", "replay", "-dir", "d", "-stream", "s"},
		{"deadletters", "replay", "-dir", "d", "-stream", "s", "-all", "-id", "1-0-0"},
		{"deadletters", "drop", "-dir", "d"},
	} {
		err := run(t.Context(), args, &bytes.Buffer{}, nil)
		if err == nil || !strings.Contains(err.Error(), "usage:") {
			t.Errorf("run %q = %v, want the usage", args, err)
		}
	}
}

// TestDirRefusesTableFlags gives -dir with flags that cannot apply to a
// directory: list's -endpoint, -table-endpoint and -region (list -dir sends
// no call) and replay's -table-endpoint (a directory has no DynamoDB
// endpoint). Each is refused as a command line the tool does not
// understand, naming the flag and the fix, rather than ignored.
func TestDirRefusesTableFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"deadletters", "list", "-dir", dir, "-endpoint", "http://127.0.0.1:1"}, "-endpoint"},
		{[]string{"deadletters", "list", "-dir", dir, "-table-endpoint", "http://127.0.0.1:1"}, "-table-endpoint"},
		{[]string{"deadletters", "list", "-dir", dir, "-region", "eu-west-1"}, "-region"},
		{[]string{"deadletters", "replay", "-dir", dir, "-stream", "s", "-all", "-table-endpoint", "http://127.0.0.1:1"}, "-table-endpoint"},
	} {
		var out bytes.Buffer
		err := run(t.Context(), tc.args, &out, nil)
		if err == nil || !strings.Contains(err.Error(), tc.flag+" ") || !strings.Contains(err.Error(), "-table") || exitCode(err) != 2 {
			t.Errorf("run %q = %v (exit %d), want refused with the usage, naming %s", tc.args, err, exitCode(err), tc.flag)
		}
	}
	// Given empty, as a script passing "$AWS_REGION" may, they change
	// nothing, and are taken.
	empty := []string{"deadletters", "list", "-dir", dir, "-endpoint", "", "-table-endpoint", "", "-region", ""}
	if err := run(t.Context(), empty, io.Discard, nil); err != nil {
		t.Errorf("run %q = %v, want nil", empty, err)
	}
}

// TestReplayNoLetters replays -all from a directory holding no letters (an
// empty dead-letter directory, or a mistyped path to another one): the
// tool says there was nothing to replay, rather than nothing at all, and
// writes no replay journal into the directory.
func TestReplayNoLetters(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	client := func(context.Context, string, string) (*kinesis.Client, error) {
		return kinesis.New(kinesis.Options{Region: "us-east-1"}), nil
	}
	if err := run(t.Context(), []string{"deadletters", "replay", "-dir", dir, "-stream", "s", "-all"}, &out, client); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "no letters in -dir "+dir) {
		t.Errorf("replay -all of a directory without letters printed %q, want it to say there are no letters", out.String())
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) > 0 {
		t.Errorf("replay of nothing left files in the directory: %v %v", entries, err)
	}
}

// TestHelp asks for help: the usage, with each flag of a subcommand, goes
// to the output and the tool succeeds, as asking for help is no error.
func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-h"}, []string{"usage:", "deadletters list"}},
		{[]string{"help"}, []string{"usage:", "deadletters replay"}},
		{[]string{"deadletters", "-h"}, []string{"usage:", "deadletters replay"}},
		{[]string{"deadletters", "list", "-h"}, []string{"usage:", "-table", "-region"}},
		{[]string{"deadletters", "replay", "-help"}, []string{"usage:", "-stream", "-table-endpoint", "-all"}},
	} {
		var out bytes.Buffer
		err := run(t.Context(), tc.args, &out, nil)
		if err != nil {
			t.Errorf("run %q = %v, want nil", tc.args, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("run %q printed:\n%s\nwant it to hold %q", tc.args, out.String(), w)
			}
		}
	}
}

// TestReplayChecksLettersBeforeAWS replays from a directory that does not
// exist, and -all from one holding no letters, with no usable AWS
// configuration: the tool names the directory, or says there is nothing to
// replay, rather than asking for an AWS region that would not help; the
// Kinesis client is made only once there are letters to put.
func TestReplayChecksLettersBeforeAWS(t *testing.T) {
	noRegion := func(context.Context, string, string) (*kinesis.Client, error) {
		return nil, errors.New("no AWS region: pass -region")
	}
	missing := filepath.Join(t.TempDir(), "no-such-dir")
	var out bytes.Buffer
	err := run(t.Context(), []string{"deadletters", "replay", "-dir", missing, "-stream", "s", "-all"}, &out, noRegion)
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("replay from a missing directory = %v, want an error naming it", err)
	}
	empty := t.TempDir()
	out.Reset()
	if err := run(t.Context(), []string{"deadletters", "replay", "-dir", empty, "-stream", "s", "-all"}, &out, noRegion); err != nil {
		t.Errorf("replay -all of an empty directory = %v, want nil", err)
	}
	if !strings.Contains(out.String(), "no letters in -dir "+empty) {
		t.Errorf("replay -all of an empty directory printed %q, want it to say there are no letters", out.String())
	}
}

// TestExitCodes checks the exit status of each outcome: 0 for success and
// for help asked for, 2 for a command line the tool does not understand
// (as the flag package, weir-local and the examples do), 1 for a failure.
func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"-h"}, 0},
		{[]string{"deadletters", "list", "-dir", t.TempDir()}, 0},
		{nil, 2},
		{[]string{"deadletters", "drop"}, 2},
		{[]string{"deadletters", "list", "-bogus"}, 2},
		{[]string{"deadletters", "list", "-dir", "d", "-table", "t"}, 2},
		{[]string{"deadletters", "replay", "-dir", "d", "-all"}, 2},
		{[]string{"deadletters", "list", "-dir", filepath.Join(t.TempDir(), "none")}, 1},
	} {
		if got := exitCode(run(t.Context(), tc.args, io.Discard, nil)); got != tc.want {
			t.Errorf("run %q: exit status %d, want %d", tc.args, got, tc.want)
		}
	}
}

// TestReplayAllPastUnreplayable replays -all from a directory one of whose
// letters cannot be replayed (its record was cut to fit, "truncated:raw"):
// the letters after it are put all the same, and the command fails naming
// it, instead of stopping at it at every run.
func TestReplayAllPastUnreplayable(t *testing.T) {
	f := newFixture(t)
	dead, err := deadletter.Open(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	cut := []stream.DeadLetter{{Time: 1500, Output: 0, Index: 0, Record: []byte("cu"), Encoding: "truncated:raw", Err: "boom"}}
	if err := dead.Quarantine(t.Context(), cut); err != nil {
		t.Fatal(err)
	}
	dead.Close()
	out, err := f.cmd(t, append([]string{"deadletters", "replay", "-stream", f.stream, "-all"}, f.store...)...)
	if err == nil || !strings.Contains(err.Error(), "1500-0-0") || exitCode(err) != 1 {
		t.Errorf("replay -all with a letter that cannot be replayed = %v (exit status %d), want an error naming it, status 1\n%s", err, exitCode(err), out)
	}
	want := []string{"2000-1-0=c", "k1=a", "k2=b", "k4=d"}
	if diff := cmp.Diff(want, f.records(t)); diff != "" {
		t.Errorf("stream after replay -all (-want +got):\n%s", diff)
	}
}

// TestReplayThrottledPut replays a letter whose put Kinesis throttles: it
// answered that nothing was put, so the next replay puts the letter, once,
// without first reading the stream for it (as it must after a put with no
// answer), which on a stream busy enough to throttle puts is slow and
// throttled too.
func TestReplayThrottledPut(t *testing.T) {
	f := newFixture(t)
	// A record in each shard: kinesalite never answers an AT_TIMESTAMP
	// GetShardIterator on an empty shard (mhart/kinesalite issue 84).
	for _, hashKey := range []string{"0", "340282366920938463463374607431768211455"} {
		if _, err := f.c.PutRecord(t.Context(), &kinesis.PutRecordInput{StreamName: &f.stream, Data: []byte("x"),
			PartitionKey: aws.String("filler"), ExplicitHashKey: aws.String(hashKey)}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := faults.New(faults.Config{Rules: []faults.Rule{{Operation: "PutRecord", Kind: faults.Throughput, Times: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	c := servers.Env(t).Kinesis(func(o *kinesis.Options) { o.HTTPClient = tr })
	replayWith := func() (string, error) {
		var out bytes.Buffer
		err := replay(t.Context(), func() (*kinesis.Client, error) { return c, nil }, clock.Real{}, f.dir, f.stream, []string{"1000-0-1"}, &out)
		return out.String(), err
	}
	var throttled *types.ProvisionedThroughputExceededException
	if out, err := replayWith(); !errors.As(err, &throttled) {
		t.Fatalf("a replay whose put is throttled = %v, want ProvisionedThroughputExceededException\n%s", err, out)
	}
	if out, err := replayWith(); err != nil {
		t.Fatalf("the replay after the throttled put: %v\n%s", err, out)
	}
	if n := tr.Requests("GetShardIterator"); n > 0 {
		t.Errorf("the replay after the throttled put read the stream for the letter (%d GetShardIterator), want none: nothing was put", n)
	}
	want := []string{"filler=x", "filler=x", "k2=b"}
	if diff := cmp.Diff(want, f.records(t)); diff != "" {
		t.Errorf("stream after the replays (-want +got):\n%s", diff)
	}
}

// busyClient is an AWS SDK HTTP client that, before each GetRecords it
// sends, puts a record into every shard of the fixture's stream, as the
// producers of a busy stream do, so that no page is ever empty. Past
// maxGets GetRecords it fails them: a search that follows the tip for ever
// fails instead of hanging the test.
type busyClient struct {
	f    *fixture
	next *faults.Transport
	gets atomic.Int32
}

const maxGets = 50

func (b *busyClient) Do(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".GetRecords") {
		if b.gets.Add(1) > maxGets {
			return nil, fmt.Errorf("GetRecords sent %d times: the search follows the tip of a busy stream", maxGets)
		}
		for _, hashKey := range []string{"0", "340282366920938463463374607431768211455"} {
			if _, err := b.f.c.PutRecord(req.Context(), &kinesis.PutRecordInput{StreamName: &b.f.stream, Data: []byte("x"),
				PartitionKey: aws.String("busy"), ExplicitHashKey: aws.String(hashKey)}); err != nil {
				return nil, err
			}
		}
	}
	return b.next.Do(req)
}

// TestReplayFindOnBusyStream looks for a letter's unconfirmed put in a
// stream whose every shard gets records all the time: the search stops at
// the tip, where every record put before it began has been read, and finds
// the record, instead of following the tip for ever.
func TestReplayFindOnBusyStream(t *testing.T) {
	f := newFixture(t)
	// Letter 1000-0-0's record, key k1, lies in the second shard: the
	// first is read to its tip without finding it.
	if _, err := f.c.PutRecord(t.Context(), &kinesis.PutRecordInput{StreamName: &f.stream, Data: []byte("a"), PartitionKey: aws.String("k1")}); err != nil {
		t.Fatal(err)
	}
	d, err := os.OpenFile(filepath.Join(f.dir, journalName), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	j := &journal{f: d}
	if err := j.add(journalEntry{ID: "1000-0-0", State: statePutting, Stream: f.stream, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	d.Close()
	tr, err := faults.New(faults.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := servers.Env(t).Kinesis(func(o *kinesis.Options) { o.HTTPClient = &busyClient{f: f, next: tr} })
	var out bytes.Buffer
	if err := replay(t.Context(), func() (*kinesis.Client, error) { return c, nil }, clock.Real{}, f.dir, f.stream, []string{"1000-0-0"}, &out); err != nil {
		t.Fatalf("replay: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "1000-0-0: found in "+f.stream) {
		t.Errorf("replay says:\n%s\nwant the letter found in the stream", out.String())
	}
}
