package shardstate

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// batchHookClient runs batch, if set, in place of each BatchWriteItem:
// it is given the call and the client.
type batchHookClient struct {
	Client
	batch func(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns []func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
}

func (h batchHookClient) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	if h.batch != nil {
		return h.batch(ctx, in, optFns)
	}
	return h.Client.BatchWriteItem(ctx, in, optFns...)
}

// TestDynamoDeleteGenLevel checks, on dynalite, the level at which a Put
// logs an old generation it could not delete: INFO when the cause is the
// Put's own context cancelled (a worker stopping at once: the generation
// left behind is the stop's, expected), WARN for any other failure.
func TestDynamoDeleteGenLevel(t *testing.T) {
	c := servers.Env(t).DynamoDB()
	table := newTable(t, c)
	for _, tc := range []struct {
		name  string
		fail  func(cancel context.CancelFunc) error // the BatchWriteItem's failure
		level string
	}{
		{"stopped", func(cancel context.CancelFunc) error { cancel(); return context.Canceled }, "INFO"},
		{"failed", func(context.CancelFunc) error { return errors.New("connection reset") }, "WARN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := Key{Application: "app", Stream: "s", Shard: "shardId-" + tc.name}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var logs bytes.Buffer
			d, err := NewDynamo(DynamoConfig{Table: table, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Client: batchHookClient{Client: c,
				batch: func(context.Context, *dynamodb.BatchWriteItemInput, []func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
					return nil, tc.fail(cancel)
				}}})
			if err != nil {
				t.Fatal(err)
			}
			lease := Lease{Counter: 1, Owner: "w"}
			if err := d.Put(ctx, k, Snapshot{Data: []byte("one"), Position: pos("100", 0), Lease: lease}); err != nil {
				t.Fatal(err)
			}
			// The second Put replaces the first generation, whose delete fails.
			if err := d.Put(ctx, k, Snapshot{Data: []byte("two"), Position: pos("200", 0), Lease: lease}); err != nil {
				t.Fatal(err)
			}
			line := logs.String()
			if !strings.Contains(line, "could not delete an old snapshot generation") || !strings.Contains(line, "level="+tc.level) {
				t.Errorf("log %q: want the generation left behind at level %s", line, tc.level)
			}
		})
	}
}
