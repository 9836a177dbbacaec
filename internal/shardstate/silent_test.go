package shardstate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/attempt"
	"github.com/weirstream/weir/internal/localaws/faults"
)

// A DynamoDB that never answers fails each call of the store once its
// attempt timeout passes on the store's clock, with an error wrapping
// attempt.ErrTimeout. Before, a Put, Claim or Get waited for the silent
// connection for ever: the Kinesis receiver's save of a shard's state held
// its lock meanwhile, so the shard hand-offs, losses, ends and loads behind
// it waited too, and nothing said why.
func TestDynamoSilentCallsTimeOut(t *testing.T) {
	db := dynamodb.New(dynamodb.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(faults.Silent(t)),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		Retryer:     aws.NopRetryer{}, // one attempt a call
	})
	clk := clock.NewManual(time.Unix(0, 0))
	d, err := NewDynamo(DynamoConfig{Client: db, Table: "states", Clock: clk, AttemptTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	key := Key{Application: "app", Stream: "s", Shard: "shardId-0", Shape: "v1"}
	lease := Lease{Counter: 1, Owner: "w"}
	for _, tc := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Put", func(ctx context.Context) error {
			return d.Put(ctx, key, Snapshot{Data: []byte("state"), Lease: lease})
		}},
		{"Claim", func(ctx context.Context) error { return d.Claim(ctx, key, lease) }},
		{"Get", func(ctx context.Context) error { _, err := d.Get(ctx, key); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- tc.call(ctx) }()
			wait, stop := context.WithTimeout(t.Context(), 30*time.Second) // a guard, not a measure
			defer stop()
			if err := clk.WaitForWaiters(wait, 1); err != nil {
				cancel()
				<-done
				t.Fatalf("%s on a silent DynamoDB waits on no attempt timeout: %v", tc.name, err)
			}
			clk.Advance(time.Second)
			if err := <-done; !errors.Is(err, attempt.ErrTimeout) {
				t.Errorf("%s on a silent DynamoDB: %v, want an error wrapping attempt.ErrTimeout", tc.name, err)
			}
		})
	}
}
