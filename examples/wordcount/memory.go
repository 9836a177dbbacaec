package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// runMemory counts generated lines fed through the in-process memory source.
func runMemory(ctx context.Context, o options, logger *slog.Logger, out io.Writer) error {
	mon, err := startMonitor(ctx, o, logger, out, nil)
	if err != nil {
		return err
	}
	defer mon.stop()
	p, err := newPipeline(o, logger, mon.listeners()...)
	if err != nil {
		return err
	}
	src, err := memory.New[string](memory.Config{Name: "generated", Shards: o.shards})
	if err != nil {
		return err
	}
	counted, err := countWords(stream.From(p, src), o, out)
	if err != nil {
		return err
	}

	ctx, cancel := withDuration(ctx, o.duration)
	defer cancel()
	produced := make(chan int, 1)
	go func() {
		// The source takes every line sent before it stops, and its Stop
		// pushes them: the drain counts them all.
		n, _ := produce(ctx, o.rate, func(ctx context.Context, lines []string) error {
			return src.Send(ctx, lines...)
		})
		produced <- n
	}()
	err = p.Run(ctx) // until Ctrl-C or -duration, then drains
	cancel()         // a Run that failed stops the producer too
	fmt.Fprintf(out, "produced %d lines\n", <-produced)
	fmt.Fprintf(out, "counted %d lines\n", counted.Load())
	return err
}
