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
	sc, err := newContext(o, logger, mon.listeners()...)
	if err != nil {
		return err
	}
	src, err := memory.New[string](memory.Config{Name: "generated", Shards: o.shards})
	if err != nil {
		return err
	}
	counted, err := countWords(stream.From(sc, src), o, out)
	if err != nil {
		return err
	}

	prodCtx, stopProducing := context.WithCancel(ctx)
	defer stopProducing()
	produced := make(chan int, 1)
	go func() {
		n, _ := produce(prodCtx, o.rate, func(ctx context.Context, lines []string) error {
			return src.Send(ctx, lines...)
		})
		produced <- n
	}()
	err = drainOnDone(ctx, o, sc, func() {
		stopProducing()
		fmt.Fprintf(out, "produced %d lines; draining\n", <-produced)
	})
	fmt.Fprintf(out, "counted %d lines\n", counted.Load())
	return err
}

// drainOnDone runs sc until ctx is done or o.duration has passed (0: no
// limit), then calls beforeDrain and drains sc.
// It returns Run's error, or nil after a clean drain.
func drainOnDone(ctx context.Context, o options, sc *stream.Context, beforeDrain func()) error {
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	done := make(chan error, 1)
	go func() { done <- sc.Run(context.Background()) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	beforeDrain()
	sc.Drain()
	return <-done
}
