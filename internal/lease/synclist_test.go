package lease

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/internal/localaws"
)

// fixLog keeps the fix attribute of every WARN, by message.
type fixLog struct {
	mu    sync.Mutex
	fixes map[string][]string
}

func (h *fixLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *fixLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *fixLog) WithGroup(string) slog.Handler            { return h }
func (h *fixLog) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return nil
	}
	fix := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "fix" {
			fix = a.Value.String()
		}
		return true
	})
	h.mu.Lock()
	h.fixes[r.Message] = append(h.fixes[r.Message], fix)
	h.mu.Unlock()
	return nil
}

// TestShardSyncListingRefusedNamesKinesis: a shard sync whose listing of
// the stream's shards Kinesis refuses (the stream deleted: a fleet worker
// that holds no lease of it reads nothing, and learns it from its shard
// sync) warns once without sending the user to the lease table: the fix
// said to allow the lease table's IAM actions on the table, for an error
// of Kinesis about the stream.
func TestShardSyncListingRefusedNamesKinesis(t *testing.T) {
	logs := &fixLog{fixes: make(map[string][]string)}
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
	for msg, f := range logs.fixes {
		if strings.Contains(msg, "shard sync failed") {
			fixes = append(fixes, f...)
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
