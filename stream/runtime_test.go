package stream_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/source"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// TestRuntimeCarriesTheIntervals checks that a receiver learns the
// driver's batch and block intervals, defaults applied, so that it can
// default its own time-based settings to them.
func TestRuntimeCarriesTheIntervals(t *testing.T) {
	tests := []struct {
		name      string
		cfg       stream.Config
		wantBatch time.Duration
		wantBlock time.Duration
	}{
		{"defaults", stream.Config{}, stream.DefaultBatchInterval, stream.DefaultBlockInterval},
		{"set", stream.Config{BatchInterval: 3 * time.Second, BlockInterval: time.Second}, 3 * time.Second, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, err := stream.NewPipeline(tt.cfg)
				if err != nil {
					t.Fatal(err)
				}
				src, err := memory.New[string](memory.Config{})
				if err != nil {
					t.Fatal(err)
				}
				r := &rtReceiver{Source: src}
				stream.ForEach(stream.From(p, r), func(context.Context, string) error { return nil })
				p.Drain(context.Background())
				if err := p.Run(t.Context()); err != nil {
					t.Fatalf("Run: %v", err)
				}
				r.mu.Lock()
				defer r.mu.Unlock()
				if r.rt.BatchInterval != tt.wantBatch || r.rt.BlockInterval != tt.wantBlock {
					t.Errorf("Runtime intervals: batch %v, block %v; want %v, %v", r.rt.BatchInterval, r.rt.BlockInterval, tt.wantBatch, tt.wantBlock)
				}
			})
		})
	}
}

// finishingReceiver reports a shard finished as soon as it starts.
type finishingReceiver struct {
	*memory.Source[string]
	err chan error // ShardFinished's answer, or errNoHook
}

var errNoHook = errors.New("no ShardFinished")

func (r *finishingReceiver) Start(ctx context.Context, rt source.Runtime[string]) error {
	if rt.ShardFinished == nil {
		r.err <- errNoHook
	} else {
		r.err <- rt.ShardFinished(ctx, "s", "shardId-000000000001")
	}
	return r.Source.Start(ctx, rt)
}

// TestShardFinishedIsLogged checks that a receiver reporting a finished
// shard gets it logged, so the log forgets the shard, and that without a
// log it is told there is nothing to report to.
func TestShardFinishedIsLogged(t *testing.T) {
	for _, withLog := range []bool{true, false} {
		t.Run(fmt.Sprint("log=", withLog), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := recoverylog.NewMemory()
				cfg := stream.Config{}
				if withLog {
					cfg.Recovery = log
				}
				p, err := stream.NewPipeline(cfg)
				if err != nil {
					t.Fatal(err)
				}
				src, err := memory.New[string](memory.Config{})
				if err != nil {
					t.Fatal(err)
				}
				r := &finishingReceiver{Source: src, err: make(chan error, 1)}
				stream.ForEach(stream.From(p, r), func(context.Context, string) error { return nil })
				p.Drain(context.Background())
				if err := p.Run(t.Context()); err != nil {
					t.Fatalf("Run: %v", err)
				}
				err = <-r.err
				if !withLog {
					if err != errNoHook {
						t.Fatalf("without a log: ShardFinished answered %v, want no hook", err)
					}
					return
				}
				if err != nil {
					t.Fatalf("ShardFinished: %v", err)
				}
				want := recoverylog.ShardFinished("s", "shardId-000000000001")
				if !slices.ContainsFunc(log.Entries(), func(e recoverylog.Entry) bool { return e.Kind == want.Kind && e.Shard == want.Shard }) {
					t.Errorf("the log holds no %v: %v", want, log.Entries())
				}
			})
		})
	}
}
