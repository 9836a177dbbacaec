package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/letters/letterstest"
	"github.com/weirstream/weir/internal/letters/lettertable"
	"github.com/weirstream/weir/internal/localaws"
	dldynamodb "github.com/weirstream/weir/sink/deadletter/dynamodb"
	sinkddb "github.com/weirstream/weir/sink/dynamodb"
	"github.com/weirstream/weir/stream"
)

// TestListTable lists the letters of a DynamoDB dead-letter table, by
// batch time, output and index, through the command line (credentials
// and region from the environment, the endpoint from -table-endpoint or
// -endpoint).
func TestListTable(t *testing.T) {
	env := servers.Env(t)
	batches := [][]stream.DeadLetter{
		{{Time: 2000, Output: 1, Index: 0, Record: []byte("c"), Encoding: "raw", Err: "boom"}},
		{{Time: 1000, Output: 0, Index: 0, Record: []byte("a"), Encoding: "raw", Err: "boom"},
			{Time: 1000, Output: 0, Index: 1, Record: []byte("b"), Encoding: "raw", Err: "panic: kaboom\nmore"}},
	}
	name := newTable(t, env, batches)
	localCredentials(t)
	var out bytes.Buffer
	// -table-endpoint, as replay names the table's endpoint, or -endpoint,
	// as list named it first.
	for _, flag := range []string{"-table-endpoint", "-endpoint"} {
		out.Reset()
		args := []string{"deadletters", "list", "-table", name, flag, env.DynamoDBEndpoint, "-region", localaws.Region}
		if err := run(t.Context(), args, &out, nil); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
			f := strings.Fields(line)
			ids = append(ids, f[0])
			if !strings.Contains(line, "  no  ") {
				t.Errorf("line %q: want REPLAYED no", line)
			}
		}
		want := []string{tableLetter(batches[1][0]).id, tableLetter(batches[1][1]).id, tableLetter(batches[0][0]).id}
		if got, want := strings.Join(ids, " "), strings.Join(want, " "); got != want {
			t.Errorf("%s: listed %s, want %s:\n%s", flag, got, want, out.String())
		}
	}
	both := []string{"deadletters", "list", "-table", name, "-table-endpoint", env.DynamoDBEndpoint, "-endpoint", "http://127.0.0.1:1"}
	if err := run(t.Context(), both, &out, nil); err == nil || !strings.Contains(err.Error(), "differ") {
		t.Errorf("list with two table endpoints = %v, want refused", err)
	}
	if err := run(t.Context(), []string{"deadletters", "list", "-table", name, "-dir", "d"}, &out, nil); err == nil || !strings.Contains(err.Error(), "-dir and -table") {
		t.Errorf("list with -dir and -table = %v, want refused", err)
	}
}

// localCredentials sets the environment so that the AWS SDK's default
// chain takes static credentials and nothing else.
func localCredentials(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "localaws")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "localaws")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// newTableFixture is newFixture's letters in a DynamoDB dead-letter
// table, which replay reads (-table) instead of the directory.
func newTableFixture(t *testing.T) (*fixture, tableStore) {
	t.Helper()
	f := newFixture(t)
	env := servers.Env(t)
	name := newTable(t, env, f.batches)
	localCredentials(t)
	f.store = []string{"-table", name, "-table-endpoint", env.DynamoDBEndpoint, "-region", localaws.Region}
	// The letters have no source range: their IDs name their records.
	f.ids = f.ids[:0]
	for _, b := range f.batches {
		for _, l := range b {
			f.ids = append(f.ids, tableLetter(l).id)
		}
	}
	return f, tableStore{c: env.DynamoDB(), table: name}
}

// newTable creates a dead-letter table holding the letters of batches
// (each of one batch and output) and returns its name.
func newTable(t *testing.T, env *localaws.Env, batches [][]stream.DeadLetter) string {
	t.Helper()
	c := env.DynamoDB()
	name := letterstest.CreateTable(t, c)
	tab, err := dldynamodb.New(t.Context(), sinkddb.Config{Client: c, Table: name})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if err := tab.Quarantine(t.Context(), b); err != nil {
			t.Fatal(err)
		}
	}
	return name
}

// tableLetter returns l, alone in its Quarantine, as a table written by
// one worker with a recovery log holds it.
func tableLetter(l stream.DeadLetter) letter {
	key := lettertable.Keys([]stream.DeadLetter{l}, "")[0]
	return letter{id: lettertable.ID(key), key: key, DeadLetter: l}
}

// checkDone fails t unless every letter of s is marked done, with the
// stream, a shard and a sequence number.
func checkDone(t *testing.T, f *fixture, s tableStore) {
	t.Helper()
	_, state, err := s.read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range f.ids {
		e := state[id]
		if e.State != stateDone || e.Stream != f.stream || e.Shard == "" || e.Seq == "" {
			t.Errorf("letter %s: replay state %+v, want done into %s with its shard and sequence number", id, e, f.stream)
		}
	}
}

// TestReplayTableOnce checks replay from a DynamoDB dead-letter table:
// chosen letters are put once and marked done on their items, a letter
// done is never put again, and list -table says where each went.
func TestReplayTableOnce(t *testing.T) {
	f, s := newTableFixture(t)
	f.replay(t, f.ids[1])
	if diff := cmp.Diff([]string{"k2=b"}, f.records(t)); diff != "" {
		t.Errorf("after replaying one (-want +got):\n%s", diff)
	}
	f.replay(t)
	out := f.replay(t)
	if !strings.Contains(out, f.ids[0]+": already replayed to "+f.stream) {
		t.Errorf("a third replay says:\n%s\nwant every letter already replayed", out)
	}
	want := []string{f.ids[2] + "=c", "k1=a", "k2=b", "k4=d"}
	if diff := cmp.Diff(want, f.records(t)); diff != "" {
		t.Errorf("stream after replaying all, twice (-want +got):\n%s", diff)
	}
	checkDone(t, f, s)
	out, err := f.cmd(t, "deadletters", "list", "-table", s.table, "-endpoint", f.store[3], "-region", localaws.Region)
	if err != nil || strings.Count(out, "to "+f.stream+" shardId-") != 4 {
		t.Errorf("list -table after the replays (%v):\n%s\nwant all four replayed", err, out)
	}
	if _, err := f.cmd(t, append([]string{"deadletters", "replay", "-stream", f.stream, "-id", "9-9-9"}, f.store...)...); err == nil || !strings.Contains(err.Error(), "no letter 9-9-9") {
		t.Errorf("replay of an unknown letter = %v, want an error naming it", err)
	}
}

// TestReplayTableCrashWindows checks the crash windows of a replay from a
// table: a crash after it marked a letter putting and before the put (the
// record is put, once), and a crash after the put and before it marked the
// letter done (the record is found in the stream and not put again).
func TestReplayTableCrashWindows(t *testing.T) {
	f, s := newTableFixture(t)
	// A record in each shard first: kinesalite never answers an
	// AT_TIMESTAMP GetShardIterator on an empty shard (mhart/kinesalite
	// issue 84).
	for _, hashKey := range []string{"0", "340282366920938463463374607431768211455"} {
		if _, err := f.c.PutRecord(t.Context(), &kinesis.PutRecordInput{StreamName: &f.stream, Data: []byte("x"),
			PartitionKey: aws.String("filler"), ExplicitHashKey: aws.String(hashKey)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range f.batches[0] { // 1000-0-0 crashed before its put, 1000-0-1 after
		if err := s.mark(t.Context(), tableLetter(l), journalEntry{}, journalEntry{State: statePutting, Stream: f.stream, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.c.PutRecord(t.Context(), &kinesis.PutRecordInput{StreamName: &f.stream, Data: []byte("b"), PartitionKey: aws.String("k2")}); err != nil {
		t.Fatal(err)
	}

	out := f.replay(t)
	if !strings.Contains(out, f.ids[1]+": found in "+f.stream) || !strings.Contains(out, f.ids[0]+": replayed to "+f.stream) {
		t.Errorf("replay says:\n%s\nwant %s found in the stream and %s put", out, f.ids[1], f.ids[0])
	}
	want := []string{f.ids[2] + "=c", "filler=x", "filler=x", "k1=a", "k2=b", "k4=d"}
	if diff := cmp.Diff(want, f.records(t)); diff != "" {
		t.Errorf("stream after the replay (-want +got):\n%s", diff)
	}
	checkDone(t, f, s)
	f.replay(t)
	if diff := cmp.Diff(want, f.records(t)); diff != "" {
		t.Errorf("stream after a second replay (-want +got):\n%s", diff)
	}
}

// TestReplayTableStateChanged checks that a replay whose letter's state
// changed since it read it (another replay) stops instead of putting it,
// and that a mark repeated as is (the SDK's retry of an update whose
// answer was lost) is not taken for such a change.
func TestReplayTableStateChanged(t *testing.T) {
	f, s := newTableFixture(t)
	l := tableLetter(f.batches[0][0])
	putting := journalEntry{State: statePutting, Stream: f.stream, At: time.Now()}
	if err := s.mark(t.Context(), l, journalEntry{}, putting); err != nil {
		t.Fatal(err)
	}
	if err := s.mark(t.Context(), l, journalEntry{}, putting); err != nil {
		t.Errorf("the same mark again (the SDK's retry of an update whose answer was lost) = %v, want nil", err)
	}
	later := journalEntry{State: statePutting, Stream: f.stream, At: putting.At.Add(time.Second)}
	err := s.mark(t.Context(), l, journalEntry{}, later)
	if !errors.Is(err, errStateChanged) || !strings.Contains(err.Error(), "another replay") {
		t.Errorf("a second replay's mark from no state = %v, want refused", err)
	}
	done := journalEntry{State: stateDone, Stream: f.stream, At: time.Now(), Shard: "shardId-000000000000", Seq: "1"}
	for range 2 {
		if err := s.mark(t.Context(), l, putting, done); err != nil {
			t.Errorf("mark done from putting (then its retry) = %v, want nil", err)
		}
	}
	if err := s.mark(t.Context(), l, later, journalEntry{State: stateDone, Stream: f.stream, At: time.Now()}); err == nil {
		t.Errorf("a mark from a state the item does not hold succeeded")
	}
	ghost := tableLetter(stream.DeadLetter{Time: 9000})
	if err := s.mark(t.Context(), ghost, journalEntry{}, putting); err == nil {
		t.Errorf("a mark of a letter the table does not hold succeeded (UpdateItem created an item)")
	}
}

// TestReplayTableFleet lists and replays a table holding the letters of
// two workers' batches of the same time, output and indexes (each worker
// reading its own shard), and an item written before letters read from a
// shard were keyed by their source record: each is a letter of its own,
// named by its item's key, and replayed once.
func TestReplayTableFleet(t *testing.T) {
	f := newFixture(t)
	env := servers.Env(t)
	c := env.DynamoDB()
	name := letterstest.CreateTable(t, c)
	var ls []stream.DeadLetter
	for w, shard := range []string{"shardId-000000000001", "shardId-000000000002"} {
		tab, err := dldynamodb.New(t.Context(), sinkddb.Config{Client: c, Table: name})
		if err != nil {
			t.Fatal(err)
		}
		l := stream.DeadLetter{Time: 5000, Output: 0, Index: 0, Record: []byte{'a' + byte(w)}, Encoding: "raw", Err: "boom",
			Range: batch.SeqRange{Stream: "in", Shard: shard, First: "100", Last: "200", Count: 3}, Offset: 2}
		if err := tab.Quarantine(t.Context(), []stream.DeadLetter{l}); err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	// An item of the first format: key "<batch time>-<output>" and the
	// letter's Index, though the letter has a range; no "batchIndex".
	old := lettertable.Item(stream.DeadLetter{Time: 4000, Output: 0, Index: 3, Record: []byte("o"), Encoding: "raw", Err: "boom"},
		map[string]types.AttributeValue{lettertable.HashKey: &types.AttributeValueMemberS{Value: "4000-0"}, lettertable.RangeKey: &types.AttributeValueMemberN{Value: "3"}})
	delete(old, "batchIndex")
	old["range"] = lettertable.Item(ls[0], nil)["range"]
	if _, err := c.PutItem(t.Context(), &ddb.PutItemInput{TableName: aws.String(name), Item: old}); err != nil {
		t.Fatal(err)
	}
	localCredentials(t)
	f.store = []string{"-table", name, "-table-endpoint", env.DynamoDBEndpoint, "-region", localaws.Region}
	out, err := f.cmd(t, "deadletters", "list", "-table", name, "-endpoint", env.DynamoDBEndpoint, "-region", localaws.Region)
	if err != nil {
		t.Fatal(err)
	}
	a, b := "0:2:in/shardId-000000000001/100-2", "0:2:in/shardId-000000000002/100-2"
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		ids = append(ids, strings.Fields(line)[0])
	}
	if diff := cmp.Diff([]string{"4000-0-3", a, b}, ids); diff != "" {
		t.Fatalf("listed IDs (-want +got):\n%s\n%s", diff, out)
	}
	f.replay(t, b)
	if diff := cmp.Diff([]string{b + "=b"}, f.records(t)); diff != "" {
		t.Errorf("after replaying %s (-want +got):\n%s", b, diff)
	}
	f.replay(t)
	out = f.replay(t)
	for _, id := range []string{"4000-0-3", a, b} {
		if !strings.Contains(out, id+": already replayed to "+f.stream) {
			t.Errorf("a third replay says:\n%s\nwant %s already replayed", out, id)
		}
	}
	if diff := cmp.Diff([]string{a + "=a", b + "=b", "4000-0-3=o"}, f.records(t)); diff != "" {
		t.Errorf("stream after replaying all, twice (-want +got):\n%s", diff)
	}
}
