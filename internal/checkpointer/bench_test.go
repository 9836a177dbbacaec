package checkpointer

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkCheckpointerRound measures one interval's round over 500 shards
// with an in-memory committer: the checkpointer's own overhead.
func BenchmarkCheckpointerRound(b *testing.B) {
	const shards = 500
	var seq atomic.Int64
	cp, err := New(Config{
		Interval: time.Second,
		Latest:   func(string) (string, bool) { return strconv.FormatInt(seq.Load(), 10), true },
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	nop := CommitterFunc(func(context.Context, string, string) error { return nil })
	for i := range shards {
		if err := cp.Register(fmt.Sprintf("shardId-%012d", i), nop, ""); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		seq.Add(1)
		if err := cp.fire(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*shards), "ns/shard")
}
