package lease

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/localaws"
)

// BenchmarkTableCheckpoint measures one conditional checkpoint write on
// dynalite, the checkpointer.Committer's cost in a round.
func BenchmarkTableCheckpoint(b *testing.B) {
	db := servers.Env(b).DynamoDB()
	tbl, err := NewTable(TableConfig{Name: localaws.UniqueName(b), Client: db, PollInterval: 10 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := tbl.Ensure(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := tbl.Create(ctx, Lease{Shard: "s", Owner: "w"}); err != nil {
		b.Fatal(err)
	}
	l := Lease{Shard: "s", Owner: "w"}
	n := int64(0)
	for b.Loop() {
		n++
		if l, err = tbl.Checkpoint(ctx, l, strconv.FormatInt(n, 10), 0); err != nil {
			b.Fatal(err)
		}
	}
}
