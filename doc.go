// Package weir is a Go framework for reliable micro-batch stream processing on
// Amazon Kinesis, with a typed, DStream-like API.
//
// Receivers read records into blocks; every block remembers the Kinesis
// sequence-number ranges it came from. Every batch interval the driver cuts a
// typed batch from the stored blocks and runs the pipeline's operators and
// outputs on it. Because each block can be rebuilt by re-reading its ranges,
// weir is at-least-once without a data write-ahead log. Progress is committed
// to DynamoDB by an interval checkpointer, and several workers share a stream
// through a DynamoDB lease table in the Kinesis Client Library's layout.
//
// DESIGN.md, at the root of the repository, is the design document: the
// architecture and import rules, the data flow of one record, recovery, the
// guarantees below, the failure model, leases and the test setup. The godoc
// of each package refers to its sections by name.
//
// # Packages
//
//   - [github.com/weirstream/weir/batch]: batch times, block IDs, sequence ranges, Batch[T].
//   - [github.com/weirstream/weir/source]: the Receiver contract, the BlockGenerator, the block store.
//   - [github.com/weirstream/weir/source/memory]: an in-process queue source for tests and examples.
//   - [github.com/weirstream/weir/source/kinesis]: the Kinesis receiver.
//   - [github.com/weirstream/weir/source/kinesis/kinesistest]: a fake Kinesis for pipeline tests.
//   - [github.com/weirstream/weir/checkpoint]: the interval checkpointer and the lease table.
//   - [github.com/weirstream/weir/recovery]: the metadata log that makes recovery exact.
//   - [github.com/weirstream/weir/stream]: the driver (Pipeline), Stream[T], operators and outputs.
//   - [github.com/weirstream/weir/sink/files]: an exactly-once file sink, one file per batch time.
//
// # Guarantees
//
//   - G1 no loss: every record put on the stream reaches the outputs of some
//     completed batch.
//   - G2 same batches: with a recovery log, a batch recomputed after a crash
//     has the same time, ranges and records as before it.
//   - G3 bounded duplicates: only batches whose outputs started but did not
//     complete run twice.
//   - G4 safe checkpoints: a checkpoint never passes a record that is not in
//     a completed batch.
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
//		Leases: &kinesis.LeaseConfig{}, // leases and checkpoints in DynamoDB
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
//	return p.Run(ctx) // Ctrl-C drains (leases handed back, stored records processed), then nil
package weir
