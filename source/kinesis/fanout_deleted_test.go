package kinesis

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/weirstream/weir/checkpoint/leasetable"
)

// lockedBuffer is a log destination safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestFanOutStreamDeletedStopsStart: a stream deleted while fan-out
// readers read it (kinesis-mock) ends Start with an error naming the
// stream, the shard, that the stream is gone, and the fix, as polling
// readers do. Its shard sync put off for an hour, the reader meets the
// deletion itself: when its subscription is renewed (refused, the
// consumer gone with the stream), or, with leases (whose shard sync does
// not end Start) and a subscription that goes on sending empty events
// (as kinesis-mock's does), at its end-of-shard check. Before, the first
// ended Start naming neither the stream's deletion nor a fix ("ConsumerARN
// not found"), and the second read on until the subscription's lifetime
// ended (5 minutes), saying nothing above DEBUG. A consumer deregistered
// while the stream stays ends Start too, naming the consumer and the fix.
func TestFanOutStreamDeletedStopsStart(t *testing.T) {
	t.Parallel()
	env := mockServers.Env(t)
	m := &mockFanOut{env: env, client: env.KinesisMock()}
	renewed := func(_ *testing.T, cfg *Config) {
		cfg.ShardSyncInterval = time.Hour
		cfg.FanOut.lifetime = 1500 * time.Millisecond
	}
	deleteStream := func(t *testing.T, cfg Config) {
		if _, err := m.client.DeleteStream(t.Context(), &awskinesis.DeleteStreamInput{StreamName: aws.String(cfg.Stream), EnforceConsumerDeletion: aws.Bool(true)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name   string
		tweak  func(t *testing.T, cfg *Config)
		delete func(t *testing.T, cfg Config)
		want   string
	}{
		{"SubscriptionRenewed", renewed, deleteStream, "no longer exists"},
		{"SubscriptionGoesOn", func(t *testing.T, cfg *Config) {
			cfg.ShardSyncInterval = 200 * time.Millisecond // the end-of-shard checks'
			cfg.Leases = &leasetable.Config{TableName: cfg.Stream, DynamoDB: servers.Env(t).DynamoDB(), WorkerID: "w",
				LeaseDuration: 2 * time.Second, CheckpointInterval: 100 * time.Millisecond}
		}, deleteStream, "no longer exists"},
		// Only the consumer deregistered, the stream still there: the
		// fix is to start again, which registers it.
		{"ConsumerDeregistered", renewed, func(t *testing.T, cfg Config) {
			d, err := m.client.DescribeStreamSummary(t.Context(), &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String(cfg.Stream)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.client.DeregisterStreamConsumer(t.Context(), &awskinesis.DeregisterStreamConsumerInput{
				StreamARN: d.StreamDescriptionSummary.StreamARN, ConsumerName: aws.String(cfg.FanOut.ConsumerName)}); err != nil {
				t.Fatal(err)
			}
		}, "consumer " + "weir-"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			stream := m.stream(t, 1)
			data := payloads("d", 20)
			m.put(t, stream, data)
			cfg := m.config(stream, m.newSpy(0))
			c.tweak(t, &cfg)
			logs := &lockedBuffer{}
			cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
			run, w := startCompleting(t, cfg, len(data))
			w.waitFor(t, run, len(data))
			c.delete(t, cfg)
			guard := time.NewTimer(waitLimit)
			defer guard.Stop()
			select {
			case err := <-run.errc:
				run.errc <- nil // for run.stop: the error is checked here
				if err == nil {
					t.Fatalf("Start = nil, want it to say %q", c.want)
				}
				for _, want := range []string{"stream " + stream, "shardId-000000000000", c.want, "fix:"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("Start = %v\nwant it to say %q", err, want)
					}
				}
			case <-guard.C:
				t.Fatalf("Start still running %v after the deletion; logs:\n%s", waitLimit, logs)
			}
		})
	}
}
