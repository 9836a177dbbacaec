package shardstate

import (
	"context"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/dynamochunk"
)

// EnsureTable creates the shard state table if it does not exist and waits
// until it serves reads and writes, as dynamochunk.EnsureTable does, with
// the store's key (log, seq). A call DynamoDB denies for want of an IAM
// permission fails it naming the action to allow (see accessFix).
func EnsureTable(ctx context.Context, c dynamochunk.TableClient, clk clock.Clock, log *slog.Logger, table string, opts ...func(*dynamodb.Options)) error {
	return accessFix(dynamochunk.EnsureTable(ctx, c, clk, log, table, attrLog, attrSeq, "shard state table", opts...), table)
}

// policy is the IAM policy of the shard state table's calls.
const policy = "docs/iam/dynamodb-shardstate.json"

// accessFix returns err, the error of a call on table, with the fix of an
// access denied appended (the action to allow, and policy).
func accessFix(err error, table string) error {
	return dynamochunk.AccessFix(err, table, policy)
}
