package kinesisrecovery_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// TestStaleRecoveryLogOnARecreatedStream runs a pipeline with a directory
// recovery log on kinesalite, deletes the stream and creates it again with
// the same name (the same shard IDs, new sequence numbers), and restarts
// the pipeline on the old directory. Kinesis refuses the logged positions
// (InvalidArgumentException: they did not come from this stream), so no
// shard can be read: Run must fail with an error naming the stream, the
// shard, the position, that the log belongs to an earlier stream and the
// fix, rather than cut empty batches forever. Without leases, and with
// leases on a new table, whose checkpoints (TRIM_HORIZON) are not the
// cause. Moving the directory away, as the error says, then reads the new
// stream's records.
func TestStaleRecoveryLogOnARecreatedStream(t *testing.T) {
	for _, leases := range []bool{false, true} {
		t.Run("leases="+strconv.FormatBool(leases), func(t *testing.T) {
			env := localaws.ForTest(t, localaws.Options{Kinesis: true, DynamoDB: leases})
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			name := localaws.UniqueName(t)
			logDir := t.TempDir()
			if err := env.CreateStream(ctx, name, 2); err != nil {
				t.Fatal(err)
			}
			put := func() {
				t.Helper()
				data := make([][]byte, 10)
				for i := range data {
					data[i] = []byte("rec-" + strconv.Itoa(i))
				}
				if err := env.PutRecords(ctx, name, data, strconv.Itoa); err != nil {
					t.Fatal(err)
				}
			}
			// run runs the pipeline on logDir until it saw 10 records, then
			// drains it, and returns Run's error.
			run := func(table string) error {
				t.Helper()
				awsCfg := env.AWSConfig()
				cfg := kinesis.Config{Stream: name, App: "recreated", InitialPosition: kinesis.TrimHorizon,
					AWS: &awsCfg, Endpoint: env.KinesisEndpoint, PollInterval: 10 * time.Millisecond}
				if leases {
					cfg.Leases = &leasetable.Config{TableName: table, Endpoint: env.DynamoDBEndpoint}
				}
				recv, err := kinesis.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				p, err := stream.NewPipeline(stream.Config{BatchInterval: 100 * time.Millisecond, Recovery: recovery.Dir(logDir)})
				if err != nil {
					t.Fatal(err)
				}
				var seen atomic.Int64
				stream.ForEachBatch(stream.From(p, recv), func(ctx context.Context, b *batch.Batch[kinesis.Record]) error {
					if seen.Add(int64(b.Len())) >= 10 {
						return p.Drain(ctx) // from an output: requests the drain and returns
					}
					return nil
				})
				errc := make(chan error, 1)
				go func() { errc <- p.Run(ctx) }()
				select {
				case err := <-errc:
					return err
				case <-ctx.Done():
					p.Stop()
					<-errc
					t.Fatalf("Run neither read the 10 records nor failed in time (read %d)", seen.Load())
					return nil
				}
			}

			put()
			if err := run(localaws.UniqueName(t) + "-1"); err != nil {
				t.Fatalf("first Run: %v", err)
			}
			recreate(ctx, t, env, name)
			put()

			err := run(localaws.UniqueName(t) + "-2")
			if err == nil {
				t.Fatal("Run on the old recovery log returned nil")
			}
			for _, want := range []string{name, "shardId-00000000000", "earlier", "recovery log", "recovery.Dir"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Run = %v\nwant it to name %q", err, want)
				}
			}
			t.Logf("Run on the old recovery log: %v", err)

			if err := os.Rename(logDir, logDir+".old"); err != nil {
				t.Fatal(err)
			}
			if err := run(localaws.UniqueName(t) + "-3"); err != nil {
				t.Fatalf("Run with the log moved away: %v", err)
			}
		})
	}
}

// recreate deletes stream name and creates it again with the same shards,
// until the new one's creation time differs from the old one's: kinesalite
// encodes the creation second in sequence numbers and accepts an old one
// from a stream created in the same second (where Kinesis, whose streams
// take seconds to delete and create, refuses it), so the refusal this
// test is about needs another second.
func recreate(ctx context.Context, t *testing.T, env *localaws.Env, name string) {
	t.Helper()
	client := env.Kinesis()
	created := func() time.Time {
		out, err := client.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToTime(out.StreamDescriptionSummary.StreamCreationTimestamp)
	}
	old := created()
	gone := awskinesis.NewStreamNotExistsWaiter(client, func(o *awskinesis.StreamNotExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = time.Millisecond, 100*time.Millisecond
	})
	for {
		if _, err := client.DeleteStream(ctx, &awskinesis.DeleteStreamInput{StreamName: aws.String(name)}); err != nil {
			t.Fatal(err)
		}
		if err := gone.Wait(ctx, &awskinesis.DescribeStreamInput{StreamName: aws.String(name)}, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := env.CreateStream(ctx, name, 2); err != nil {
			t.Fatal(err)
		}
		if !created().Equal(old) {
			return
		}
	}
}
