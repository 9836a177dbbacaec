package iamcheck

import (
	"log/slog"
	"testing"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/dynamochunk"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/shardstate"
)

// TestShardStatePolicy makes the calls of state per shard on its table,
// as the Kinesis receiver with leases does: the table created on demand, a
// shard's state claimed, a snapshot stored twice (the second deletes the
// first's chunks) and read back; and checks them against
// dynamodb-shardstate.json.
func TestShardStatePolicy(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	ctx := t.Context()
	awsCfg := env.AWSConfig()
	rec := newRecorder(awsCfg.HTTPClient)
	awsCfg.HTTPClient = rec
	db := awsdynamodb.NewFromConfig(awsCfg, func(o *awsdynamodb.Options) { o.BaseEndpoint = &env.DynamoDBEndpoint })
	table := localaws.UniqueName(t) + "-state"
	if err := dynamochunk.EnsureTable(ctx, db, clock.Real{}, slog.Default(), table, "log", "seq", "shard state table"); err != nil {
		t.Fatal(err)
	}
	store, err := shardstate.NewDynamo(shardstate.DynamoConfig{Client: db, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	key := shardstate.Key{Application: "iam", Stream: "s", Shard: "shardId-000000000000", Shape: "v1"}
	lease := shardstate.Lease{Counter: 1, Owner: "w"}
	if err := store.Claim(ctx, key, lease); err != nil {
		t.Fatal(err)
	}
	for i, seq := range []string{"10", "20"} {
		data := make([]byte, 400<<10) // two chunks
		data[0] = byte(i)
		if err := store.Put(ctx, key, shardstate.Snapshot{Data: data, Position: shardstate.Position{Sequence: seq}, Lease: lease}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.Get(ctx, key); err != nil {
		t.Fatal(err)
	}
	check(t, "dynamodb-shardstate.json", "dynamodb", rec.called())
	provisioned(t, rec.called(), "dynamodb:CreateTable")
}
