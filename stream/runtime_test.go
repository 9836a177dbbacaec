package stream_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

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
