// Package stream is weir's driver and its typed DStream API.
//
// A Pipeline holds the graph of a stream job: sources (From turns any
// source.Receiver[T] into a *Stream[T]), transformations (Map, Filter,
// FlatMap, MapBatch, Union, Transform, Window, ReduceByKey, CountByValue,
// ReduceByKeyAndWindow, UpdateStateByKey, MapWithState) and outputs (ForEach,
// ForEachPartition, ForEachBatch, Print). Go methods cannot have type parameters, so the
// operators are package functions:
//
//	p, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second})
//	lines := stream.From(p, src) // src: a source.Receiver[string], such as a source/memory.Source
//	counts := stream.CountByValue(stream.FlatMap(lines, strings.Fields))
//	stream.Print(counts, 10)
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
//	defer stop()
//	context.AfterFunc(ctx, stop) // a second Ctrl-C stops at once
//	err = p.Run(ctx) // Ctrl-C drains, then Run returns nil
//
// # How a record flows
//
// Run starts every receiver in its own goroutine. A receiver pushes blocks
// of records; a push returns once the block is in the source's block store
// and, with a recovery log, in the log, with the BlockID the driver gave it.
// At every multiple of the batch interval the driver cuts a batch: all
// stored blocks of every source not yet in a batch, in block order. Batches
// run one at a time, in batch-time order; the outputs of a batch run in the
// order they were declared, each computing its stream lazily from the
// sources up, and a stream shared by several outputs is computed once per
// batch (see Execution for how a batch runs). When every output of a batch
// has succeeded, the receivers' source.CompletionObserver hooks (a receiver
// that is one, or those it registered with source.Runtime.Observe) are told
// its blocks are complete and the blocks are dropped from the store.
// Windows and state keep what they need themselves (computed batches,
// per-key state), never store blocks.
//
// # Execution
//
// A batch runs on every core: its partitions run as tasks, at most
// Config.Parallelism at a time (default GOMAXPROCS). A partition of a
// source's batch is one shard: the records of that shard from all the
// batch's blocks, in the order they were read (a block whose records carry
// no ranges is a partition of its own). One partition per shard, rather
// than per block, is the Kinesis Client Library's model of one record
// processor per shard: it keeps each shard's order through everything that
// runs per partition, at the cost of using at most as many cores as the
// batch has shards.
//
//   - Narrow operators (Map, Filter, FlatMap, MapBatch, and Union, which
//     concatenates partitions) are fused: the chain from the source, or
//     from the last stream computed, runs per partition in one task, inside
//     the task of the output or operator that consumes it. A stream that
//     several operators or outputs consume is computed once per batch and
//     kept for the batch. Their functions are called concurrently for
//     different partitions, in order within one.
//   - Keyed operators (ReduceByKey, CountByValue, and ReduceByKeyAndWindow
//     for each batch before windowing) shuffle in process: each task
//     combines its partition by key, the combined pairs are
//     hash-partitioned into Parallelism buckets, the buckets are reduced in
//     parallel (by the last task to finish combining when they hold few
//     keys, which takes less than starting more tasks), and the result is
//     ordered by where each key first appears in the batch, whatever the
//     parallelism.
//   - UpdateStateByKey and MapWithState look each record's key up in their
//     state in one task per partition, then call their function from one
//     goroutine, key by key or record by record, in batch order.
//   - Operators that need a whole batch (Transform, Window, the windowed
//     reduces) get the batch with its partitions concatenated in order;
//     what follows them and the state operators runs on slices of their
//     result of about equal size.
//   - ForEach calls its function concurrently across partitions and in
//     order within one; ForEachPartition gets a whole partition per call;
//     ForEachBatch and Print get the whole batch, from one goroutine.
//
// What does not change: batches run one at a time, in batch-time order,
// and the outputs of a batch in the order they were declared, each
// finishing before the next starts. The batch an output sees holds its
// records in block order: a source's has one part per block; records of
// one shard keep their order through narrow operators. A panic in a user
// function fails its output as an output's error does, instead of crashing
// the process: the output is tried again (Retry), then the batch fails with
// a *BatchError holding the panic value and stack, whose message names the
// shard and, where it can, the record that failed, or, with Quarantine, the
// failing records go to dead letters and the batch completes. A receiver
// whose Start panics (a source's decoder on a poison record) fails Run, as
// one whose Start returns an error does, with the panic and its stack in
// the error; one whose Stop panics is a failed stop, warned about.
//
// # Recovery
//
// With Config.Recovery (recovery.Dir("state"), or a DynamoDB log from
// recovery/dynamolog for a fleet), the driver logs every stored block,
// every batch's allocation (before its outputs run) and completion (after
// they all succeeded). A restarted pipeline, built by the same code, reads the log:
// it refuses a log written by a pipeline of another shape (see Shape and
// Named), reruns every batch allocated but not completed with the same
// time and blocks, recomputing their records from their ranges, puts the
// logged but unallocated blocks in its first new batch, and tells
// receivers where each shard resumes (source.Runtime.ResumeAfter). An
// output keyed by batch time, such as the sink/files package's, is then
// exactly-once; only batches that had started and not completed run twice.
//
// # State
//
// UpdateStateByKey, MapWithState, Window and ReduceByKeyAndWindow keep
// state across batches. With a recovery log it survives a crash exactly:
// the driver snapshots it beside the log every
// Config.StateSnapshotInterval, and a restart loads the last snapshot and
// recomputes the batches completed after it from their ranges, for the
// state only (their outputs do not run again). Values are encoded with
// GobCodec unless StateCodec gives a codec; Run refuses to start if one
// cannot encode its type. On a fleet, Run refuses a stateful operator on a
// source whose shards other workers share (ErrSplitState): each worker
// would hold part of a key's state. Records repartitioned by key
// (repartition.ByKey), or declared PartitionedBy, have their state kept per
// shard, which moves with the shard's lease: one state per key across the
// fleet. PartitionedByKey and Config.AllowSplitState accept per-worker
// state instead, which a key loses when its shard's lease moves.
// DESIGN.md, "State: snapshot and lineage" and "On a fleet: state per
// shard", has the details.
//
// # Stopping
//
// Run drains when its ctx is done, within Config.DrainTimeout, and returns
// nil. Stop stops now and returns at once; Drain(ctx) stops the receivers
// gracefully, runs batches until every stored block is processed and waits
// for that, bounded by ctx; Done tells when Run has finished. Stop and Drain
// are safe to call from outputs and Listeners: from an output, give Drain
// the output's ctx (it requests the drain and returns at once); a Listener
// runs on a goroutine of its own, so Drain waits there as anywhere else. Do
// not wait on Done from inside the pipeline. An output error, once its
// retries are spent (unless the output quarantines), or a receiver's Start
// error stops the pipeline and is returned by Run; a failed batch is reported as a
// *BatchError naming its time.
//
// # Memory and backpressure
//
// One setting bounds the memory of the records read and not yet
// processed: Config.MaxBufferedBytes. Nothing is dropped when processing
// falls behind: batches wait, batch times are never skipped, pushes wait,
// and receivers stop reading. DESIGN.md, section "Memory and flow
// control", says what is bounded and how.
//
// # Time
//
// All timing uses Config.Clock, so tests run in virtual time with
// testing/synctest or clock.Manual.
package stream
