package lease

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/internal/localaws"
)

// TestShardSyncListingRefusedNamesKinesis: a shard sync whose listing of
// the stream's shards Kinesis refuses (the stream deleted: a fleet worker
// that holds no lease of it reads nothing, and learns it from its shard
// sync) warns once without sending the user to the lease table: the fix
// said to allow the lease table's IAM actions on the table, for an error
// of Kinesis about the stream.
func TestShardSyncListingRefusedNamesKinesis(t *testing.T) {
	logs := &recordLog{}
	gone := &ktypes.ResourceNotFoundException{Message: aws.String("Stream s under account 1 not found.")}
	w := newWorker(t, localaws.UniqueName(t), "w", servers.Env(t).DynamoDB(), func(c *CoordinatorConfig) {
		c.Logger = slog.New(logs)
		c.ListShards = func(context.Context) ([]ShardInfo, error) {
			return nil, errors.Join(errors.New("kinesis: listing the shards of stream s"), gone)
		}
	})
	for range 3 {
		w.c.syncListed(t.Context())
	}
	var fixes []string
	for _, l := range logs.after(0, slog.LevelWarn) {
		if strings.Contains(l.msg, "shard sync failed") {
			fixes = append(fixes, l.fix)
		}
	}
	if len(fixes) != 1 {
		t.Fatalf("shard sync warnings' fixes = %q, want one warning", fixes)
	}
	for _, wrong := range []string{"dynamodb", "lease table " + w.c.table.name, "DynamoDB at"} {
		if strings.Contains(fixes[0], wrong) {
			t.Errorf("fix of a refused Kinesis listing = %q: names %q", fixes[0], wrong)
		}
	}
	if !strings.Contains(fixes[0], "ListShards") {
		t.Errorf("fix of a refused Kinesis listing = %q: does not name the Kinesis call", fixes[0])
	}
}
