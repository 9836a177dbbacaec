package kinesismetrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/lease"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/metrics"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// TestStableWorker checks that the label of a default worker ID is its
// host name alone, the same after a restart, and that an ID the user set
// is kept whole.
func TestStableWorker(t *testing.T) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	for _, tc := range []struct{ owner, want string }{
		{lease.NewWorkerID(), host},
		{"orders-1", "orders-1"},
		{"host:8080", "host:8080"},
		{"", ""},
	} {
		if got := stableWorker(tc.owner); got != tc.want {
			t.Errorf("stableWorker(%q) = %q, want %q", tc.owner, got, tc.want)
		}
	}
}

// TestAdapters runs a receiver with leases on a local 1-shard stream and
// DynamoDB until a batch of records completed, before its first checkpoint
// interval: the adapted stats name the stream, hold the shard, show the
// checkpoint found in the lease (TRIM_HORIZON, which the checkpointer does
// not report), and every retry cause at 0; the adapted table lists the
// lease with its owner's stable label.
func TestAdapters(t *testing.T) {
	env := localaws.ForTest(t, localaws.Options{Kinesis: true, DynamoDB: true})
	ctx := t.Context()
	name := localaws.UniqueName(t)
	if err := env.CreateStream(ctx, name, 1); err != nil {
		t.Fatal(err)
	}
	if err := env.PutRecords(ctx, name, [][]byte{[]byte("a"), []byte("b")}, nil); err != nil {
		t.Fatal(err)
	}
	awsCfg := env.AWSConfig()
	src, err := kinesis.New(kinesis.Config{
		Stream: name, App: name, InitialPosition: kinesis.TrimHorizon,
		AWS: &awsCfg, Endpoint: env.KinesisEndpoint, PollInterval: 50 * time.Millisecond,
		Leases: &leasetable.Config{Endpoint: env.DynamoDBEndpoint, CheckpointInterval: time.Hour},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	var once sync.Once
	stream.ForEachBatch(stream.From(p, src), func(_ context.Context, b *batch.Batch[kinesis.Record]) error {
		if b.Len() > 0 {
			once.Do(func() { close(read) })
		}
		return nil
	})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil && runCtx.Err() == nil {
			t.Errorf("pipeline: %v", err)
		}
	}()
	select {
	case <-read:
	case err := <-done:
		t.Fatalf("pipeline ended before reading: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("no record read within a minute")
	}

	r := Receiver(src)
	if r.Name() != name {
		t.Errorf("Name %q, want the stream %q", r.Name(), name)
	}
	st := r.Stats()
	if len(st.Held) != 1 {
		t.Fatalf("Held %v, want the stream's one shard", st.Held)
	}
	shard := st.Held[0]
	if s := st.Shards[shard]; !s.Checkpointed || s.Checkpoint != "TRIM_HORIZON" || s.CheckpointCommits != 0 || s.RecordsRead != 2 || s.ReadLatency.Count() == 0 {
		t.Errorf("shard %s: %+v; want checkpointed at TRIM_HORIZON, no commit, 2 records read, read calls timed", shard, s)
	}
	for _, c := range []string{"throttled", "limit_exceeded", "kms_throttling", "server_error", "timeout",
		"transport", "expired_credentials", "expired_iterator", "resource_in_use"} {
		if _, ok := st.Retries[c]; !ok {
			t.Errorf("Retries lacks cause %q (has %v)", c, st.Retries)
		}
	}
	lister, err := Leases(ctx, leasetable.Config{TableName: name, DynamoDB: env.DynamoDB()})
	if err != nil {
		t.Fatal(err)
	}
	leases, err := lister.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var owners []string
	for _, l := range leases {
		owners = append(owners, l.Shard+" "+l.Owner+" "+l.Worker)
	}
	want := []string{fmt.Sprintf("%s %s %s", shard, st.WorkerID, stableWorker(st.WorkerID))}
	if !slices.Equal(owners, want) || stableWorker(st.WorkerID) == st.WorkerID {
		t.Errorf("leases %q, want %q with the owner's label stripped of its pid and random suffix", owners, want)
	}
}

// TestNilReceiver checks that a nil receiver (kinesis.New's, when its error
// was not checked) is refused by metrics.New, naming it, instead of
// panicking when the Collector asks for its name.
func TestNilReceiver(t *testing.T) {
	var r *kinesis.Receiver
	_, err := metrics.New(metrics.Config{BatchInterval: time.Second, Receivers: []metrics.Receiver{Receiver(r)}})
	if !errors.Is(err, metrics.ErrInvalidConfig) || !strings.Contains(err.Error(), "Receivers[0] nil") {
		t.Errorf("metrics.New with Receiver(nil) = %v, want an error wrapping ErrInvalidConfig naming Receivers[0]", err)
	}
}

// TestLeasesListing lists a lease table on the local DynamoDB: a table
// that cannot be scanned gives nil leases and the error (a failed listing,
// for metrics.Collector); a table holding an item that is not a lease
// gives the leases it holds, with an error naming the item, and a table
// of such items only an empty, non-nil slice: listings that show what they
// read, not failed ones.
func TestLeasesListing(t *testing.T) {
	env := localaws.ForTest(t, localaws.Options{DynamoDB: true})
	ctx := t.Context()
	name := localaws.UniqueName(t)
	lister, err := Leases(ctx, leasetable.Config{TableName: name, DynamoDB: env.DynamoDB()})
	if err != nil {
		t.Fatal(err)
	}
	if ls, err := lister.List(ctx); err == nil || ls != nil {
		t.Errorf("List of a table that does not exist: %v, %v; want nil and an error", ls, err)
	}
	tbl := lister.(leases).t
	if err := tbl.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	bad := map[string]types.AttributeValue{
		"leaseKey":     &types.AttributeValueMemberS{Value: "shard-bad"},
		"leaseCounter": &types.AttributeValueMemberS{Value: "one"},
		"checkpoint":   &types.AttributeValueMemberS{Value: "TRIM_HORIZON"},
	}
	if _, err := env.DynamoDB().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: bad}); err != nil {
		t.Fatal(err)
	}
	if ls, err := lister.List(ctx); !errors.Is(err, leasetable.ErrBadItem) || ls == nil || len(ls) != 0 {
		t.Errorf("List of a table of one bad item: %v, %v; want an empty slice and an error wrapping ErrBadItem", ls, err)
	}
	if _, err := tbl.Create(ctx, lease.Lease{Shard: "shard-good"}); err != nil {
		t.Fatal(err)
	}
	ls, err := lister.List(ctx)
	if !errors.Is(err, leasetable.ErrBadItem) || !strings.Contains(err.Error(), "shard-bad") || len(ls) != 1 || ls[0].Shard != "shard-good" {
		t.Errorf("List of a good and a bad item: %v, %v; want the good lease and an error naming the bad item", ls, err)
	}
}
