package kinesis_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// A keyed count on a receiver with leases is refused at Run before the
// receiver starts (no lease table is made), since other workers share its
// shards; without leases, or with its source declared partitioned by key
// (the count is keyed by the partition key), it runs and counts every
// record of every key.
func TestLeasesStatefulPipelineRefusedUnlessPartitionedByKey(t *testing.T) {
	f := newFleet(t, 2)
	newReceiver := func(leases bool) *kinesis.Receiver {
		cfg := kinesis.Config{Stream: f.stream, App: "splittest", InitialPosition: kinesis.TrimHorizon,
			Client: f.env.Kinesis(), PollInterval: 20 * time.Millisecond, Logger: testLogger()}
		if leases {
			cfg.Leases = &leasetable.Config{TableName: f.table, DynamoDB: f.env.DynamoDB(),
				LeaseDuration: 2 * time.Second, CheckpointInterval: 100 * time.Millisecond}
		}
		r, err := kinesis.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var mu sync.Mutex
	counts := map[string]int{}
	total := 0
	build := func(r *kinesis.Receiver, opts ...stream.Option) *stream.Pipeline {
		p, err := stream.NewPipeline(stream.Config{BatchInterval: 100 * time.Millisecond, BlockInterval: 20 * time.Millisecond, Logger: testLogger()})
		if err != nil {
			t.Fatal(err)
		}
		keys := stream.Map(stream.From(p, r, opts...), func(rec kinesis.Record) stream.Pair[string, int] {
			return stream.Pair[string, int]{Key: rec.PartitionKey, Value: 1}
		})
		st := stream.UpdateStateByKey(keys, func(_ string, vs []int, n int, _ bool) (int, bool) { return n + len(vs), true })
		stream.ForEachBatch(st, func(_ context.Context, b *batch.Batch[stream.Pair[string, int]]) error {
			mu.Lock()
			defer mu.Unlock()
			total = 0
			for kv := range b.All() {
				counts[kv.Key] = kv.Value
				total += kv.Value
			}
			select {
			case f.tick <- struct{}{}:
			default:
			}
			return nil
		})
		return p
	}

	if r := newReceiver(false); r.SharesShards() {
		t.Error("SharesShards without Leases: true, want false")
	}
	if err := build(newReceiver(false)).Validate(); err != nil {
		t.Errorf("Validate without Leases: %v", err)
	}

	leased := newReceiver(true)
	if !leased.SharesShards() {
		t.Error("SharesShards with Leases: false, want true")
	}
	refused := build(leased)
	if err := refused.Validate(); !errors.Is(err, stream.ErrSplitState) {
		t.Fatalf("Validate with Leases: %v; want ErrSplitState", err) // before Run, which would not return
	}
	if err := refused.Run(t.Context()); !errors.Is(err, stream.ErrSplitState) {
		t.Fatalf("Run with Leases: %v; want ErrSplitState", err)
	}
	var notFound *ddbtypes.ResourceNotFoundException
	if _, err := f.env.DynamoDB().DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(f.table)}); !errors.As(err, &notFound) {
		t.Errorf("lease table after a refused Run: DescribeTable: %v; want ResourceNotFoundException (nothing started)", err)
	}

	const keys, perKey = 10, 5
	data := make([][]byte, keys*perKey)
	for i := range data {
		data[i] = []byte(strconv.Itoa(i))
	}
	if err := f.env.PutRecords(t.Context(), f.stream, data, func(i int) string { return "k" + strconv.Itoa(i%keys) }); err != nil {
		t.Fatal(err)
	}
	p := build(newReceiver(true), stream.PartitionedByKey())
	done := make(chan error, 1)
	go func() { done <- p.Run(t.Context()) }()
	f.waitFor("every record counted", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return total == len(data)
	})
	if err := p.Drain(t.Context()); err != nil {
		t.Errorf("Drain: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run partitioned by key: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for k := range keys {
		if n := counts["k"+strconv.Itoa(k)]; n != perKey {
			t.Errorf("count of k%d: %d, want %d", k, n, perKey)
		}
	}
}
