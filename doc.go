// Package weir is a Go framework for reliable micro-batch stream processing on
// Amazon Kinesis, with a typed, DStream-like API. Receivers read records into
// blocks that remember the Kinesis sequence-number ranges they came from; every
// batch interval the driver cuts a typed batch from them and runs the
// pipeline's outputs on it. A lost block is rebuilt by re-reading its ranges,
// so no data write-ahead log is needed.
//
// This package holds no code. Start with package stream (the driver,
// [github.com/weirstream/weir/stream.NewPipeline]) and a source such as
// [github.com/weirstream/weir/source/kinesis]; the settings of the lease
// table and its checkpoints are in
// [github.com/weirstream/weir/checkpoint/leasetable] (the checkpoint counters
// a receiver reports in [github.com/weirstream/weir/checkpoint]), the
// recovery log in [github.com/weirstream/weir/recovery], and where
// quarantined records go in [github.com/weirstream/weir/sink/deadletter].
//
// The README lists the packages and their guarantees; DESIGN.md, at the root
// of the repository, is the design document (sections Data flow, Recovery,
// Guarantees, Failure model, Leases). In short: no record is lost (G1); with
// a recovery log, a batch recomputed after a crash has the same time and
// records (G2) and only batches whose outputs had started run twice, or up
// to 10 s of an idle stateful pipeline's empty batches (G3); a
// checkpoint never passes a record not in a completed batch (G4).
//
// # Quick start
//
//	p, err := stream.NewPipeline(stream.Config{
//		BatchInterval: time.Second,
//		Recovery:      recovery.Dir("wordcount-state"), // exact recovery after a crash
//	})
//	if err != nil {
//		return err
//	}
//	src, err := kinesis.New(kinesis.Config{
//		Stream: "words", App: "wordcount",
//		Leases: &leasetable.Config{}, // leases and checkpoints in DynamoDB
//	})
//	if err != nil {
//		return err
//	}
//	lines := stream.From(p, src)
//	words := stream.FlatMap(lines, func(r kinesis.Record) []string {
//		return strings.Fields(string(r.Data))
//	})
//	counts := stream.CountByValue(words)
//	stream.ForEachBatch(counts, func(ctx context.Context, b *batch.Batch[stream.Pair[string, int64]]) error {
//		for kv := range b.All() {
//			fmt.Println(b.Time(), kv.Key, kv.Value)
//		}
//		return nil
//	})
//	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	context.AfterFunc(ctx, stop) // a second Ctrl-C stops at once
//	return p.Run(ctx) // Ctrl-C drains (leases handed back, stored records processed), then nil
package weir
