package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/localaws"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// runLocal starts local Kinesis (and DynamoDB) servers on 127.0.0.1, creates a
// stream, produces generated text into it and counts the words read back.
func runLocal(ctx context.Context, o options, logger *slog.Logger, out io.Writer) error {
	fmt.Fprintln(out, "starting local Kinesis and DynamoDB servers on 127.0.0.1 (installing them with npm on first use)...")
	env, err := localaws.Start(ctx, localaws.Options{Kinesis: true, DynamoDB: true, Logger: logger})
	if err != nil {
		return fmt.Errorf("local servers: %w", err)
	}
	defer env.Close()
	name := "wordcount-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := env.CreateStream(ctx, name, o.shards); err != nil {
		return fmt.Errorf("create stream %s: %w", name, err)
	}
	fmt.Fprintf(out, "stream %s (%d shards) at %s\n", name, o.shards, env.KinesisEndpoint)

	awsCfg := env.AWSConfig()
	// Leases and checkpoints in the local DynamoDB, in a table of the run's
	// own, named after its stream: servers already running (weir-local's
	// WEIR_*_ENDPOINT variables) keep the tables of earlier runs, whose
	// checkpoints name records of other streams. The status page lists
	// the same table.
	leases := &leasetable.Config{TableName: name, AWS: &awsCfg, Endpoint: env.DynamoDBEndpoint}
	src, err := kinesis.New(kinesis.Config{
		Stream:          name,
		App:             o.app,
		InitialPosition: kinesis.TrimHorizon,
		AWS:             &awsCfg,
		Endpoint:        env.KinesisEndpoint,
		PollInterval:    100 * time.Millisecond,
		Logger:          logger,
		Leases:          leases,
	})
	if err != nil {
		return err
	}
	mon, err := startMonitor(ctx, o, logger, out, leases, src)
	if err != nil {
		return err
	}
	defer mon.stop()
	p, err := newPipeline(o, logger, mon.listeners()...)
	if err != nil {
		return err
	}
	lines := stream.Map(stream.From(p, src), func(r kinesis.Record) string { return string(r.Data) })
	counted, err := countWords(lines, o, out)
	if err != nil {
		return err
	}

	client := env.Kinesis()
	prodCtx, stopProducing := withDuration(ctx, o.duration)
	defer stopProducing()
	produced := make(chan int, 1)
	var seq int
	go func() {
		n, _ := produce(prodCtx, o.rate, func(ctx context.Context, lines []string) error {
			data := make([][]byte, len(lines))
			for i, l := range lines {
				data[i] = []byte(l)
			}
			seq++
			base := seq * len(lines)
			return localaws.PutRecordsOn(ctx, client, name, data, func(i int) string { return strconv.Itoa(base + i) })
		})
		produced <- n
	}()
	// Lines still in the stream when the pipeline drains are not lost (a
	// restarted application reads them), but this demo counts them all: its
	// pipeline drains once production has stopped and the receiver has read
	// every line produced (or 10s later).
	runCtx, stopRun := context.WithCancel(context.Background())
	ranCtx, ran := context.WithCancel(context.Background()) // done once Run has returned
	caughtUp := make(chan struct{})
	go func() {
		defer close(caughtUp)
		defer stopRun()
		n := <-produced
		fmt.Fprintf(out, "produced %d lines; waiting for the receiver to read them all, then draining\n", n)
		if !awaitCounted(ranCtx, counted, int64(n), 10*time.Second) {
			fmt.Fprintf(out, "counted %d of %d lines; the rest stay in the stream\n", counted.Load(), n)
		}
	}()
	err = p.Run(runCtx)
	ran()
	stopProducing()
	<-caughtUp
	cs := src.CheckpointStats()
	fmt.Fprintf(out, "counted %d lines; %d checkpoints written to the lease table, %d failed\n", counted.Load(), cs.Commits, cs.Failures)
	return err
}

// runKinesis counts the words of a real stream, through the usual AWS
// credential chain. Unless -leases=false, it holds the shards through a
// lease table in DynamoDB named after -app (created on first use, like the
// Kinesis Client Library's), checkpoints there and shares the stream with
// any other worker of the same application; a shard without a checkpoint is
// read from its trim horizon.
func runKinesis(ctx context.Context, o options, logger *slog.Logger, out io.Writer) error {
	var opts []func(*config.LoadOptions) error
	if o.region != "" {
		opts = append(opts, config.WithRegion(o.region))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return fmt.Errorf("load AWS configuration: %w", err)
	}
	// Restarted with the same -state, the receiver reads each shard after
	// the greatest sequence number the recovery log holds for it (the
	// driver recomputes the logged blocks), as the driver tells it.
	cfg := kinesis.Config{
		Stream:          o.stream,
		App:             o.app,
		InitialPosition: kinesis.TrimHorizon,
		AWS:             &awsCfg,
		Endpoint:        o.endpoint,
		Logger:          logger,
	}
	if o.leases {
		// StateDir in the recovery log's directory: restarted with the same
		// -state after a crash, this worker takes its predecessor's leases
		// back at once instead of waiting a lease duration for them to
		// expire.
		cfg.Leases = &leasetable.Config{TableName: o.app, AWS: &awsCfg, Endpoint: o.dynamoEndpoint,
			StateDir: filepath.Join(o.state, "kinesis-leases")}
	}
	src, err := kinesis.New(cfg)
	if err != nil {
		return err
	}
	mon, err := startMonitor(ctx, o, logger, out, cfg.Leases, src)
	if err != nil {
		return err
	}
	defer mon.stop()
	p, err := newPipeline(o, logger, mon.listeners()...)
	if err != nil {
		return err
	}
	lines := stream.Map(stream.From(p, src), func(r kinesis.Record) string { return string(r.Data) })
	if _, err := countWords(lines, o, out); err != nil {
		return err
	}
	ctx, cancel := withDuration(ctx, o.duration)
	defer cancel()
	return p.Run(ctx) // until Ctrl-C or -duration, then drains: leases handed back, final checkpoints
}
