package stream

import (
	"context"
	"fmt"
	"strings"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/recovery"
)

// output is an output operation: it runs once per batch of its stream.
type output struct {
	op      string
	name    string // given with Named, or ""
	index   int    // in declaration order
	n       *node
	policy  failurePolicy
	origins bool // Origins: ForEachBatch only
	run     func(r *run) error
}

// String names the output in error messages, such as "ForEach of Map
// (stream 2)" or `ForEachBatch("files") of Map (stream 2)`.
func (o *output) String() string { return o.component().String() + " of " + o.n.String() }

// component describes the output in the pipeline's shape.
func (o *output) component() recovery.Component { return recovery.Component{Kind: o.op, Name: o.name} }

// addOutput registers an output that calls f with each batch of s, in
// batch-time order, under its failure policy; it is skipped at batch times
// where s has no batch.
func addOutput[T any](s *Stream[T], op string, opts []Option, f func(ctx context.Context, b *batch.Batch[T]) error) {
	addOutputRun(s, op, opts, func(o *output) func(r *run) error {
		return func(r *run) error { return runWhole(r, o, s, f) }
	})
}

// addOutputRun registers an output whose run mk makes.
func addOutputRun[T any](s *Stream[T], op string, opts []Option, mk func(o *output) func(r *run) error) {
	oo := applyOptions(opts)
	o := &output{op: op, name: oo.name, n: s.n, origins: oo.origins}
	o.policy = policyOf(s.p, o, oo)
	takes := outputOptions
	if op == "ForEachBatch" {
		takes |= optOrigins
	}
	oo.refuseOthers(s.p, o.String(), takes)
	o.run = mk(o)
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	o.index = len(p.outputs)
	p.outputs = append(p.outputs, o)
	p.lateLocked(o.String())
}

// ForEach calls f with every record of every batch of s. Within a batch,
// f is called concurrently for records of different partitions, at most
// Config.Parallelism calls at a time, and in order within a partition:
// downstream of a source and narrow operators, a partition is a shard, so
// the records of a shard are seen one at a time, in the order they were
// read, as a Kinesis Client Library record processor sees them (see the
// Execution section of the package documentation). f must therefore be
// safe for concurrent use.
//
// Outputs run in batch-time order, one batch at a time, and within a batch
// in the order they were declared: ForEach returns when every partition is
// done. An error from f (or a panic) fails its partition, and the other
// partitions go on; the failed ones are tried again after a back-off,
// resuming after the records f accepted (see Retry, among opts). Once the
// retries are spent, the failure fails the batch: Run returns it in a
// *BatchError, and the batch's blocks are not completed; or, with
// Quarantine among opts, the records that still fail are sent to dead
// letters and the batch goes on. ctx is done when the Pipeline stops now
// (Stop, a failure, a drain past its bound); f may pass it to Drain, which
// then requests the drain without waiting. Named, among opts, names the
// output in the pipeline's shape.
//
// ForEach gives f records as the operators before it make them, so a
// source record quarantined after some of its outputs reached f is output
// in part. Before the quarantine pass, the outputs f accepted stay output
// when an operator before ForEach then fails on a later output of the same
// record (a FlatMap made two, a FlatMap after it fails on the second); the
// pass skips them as done. In the quarantine pass, a record's outputs are
// held until the operators before ForEach are done with it, so a record
// they fail on there has none of its outputs given to f. When f fails on
// one of a record's outputs, those it accepted before stay output and the
// later ones are not given to it. The letter holds the whole record:
// replaying it outputs again those f accepted. ForEachPartition and
// ForEachBatch give their function none of a quarantined record's outputs.
func ForEach[T any](s *Stream[T], f func(ctx context.Context, v T) error, opts ...Option) {
	mustExist("ForEach", "s", s)
	requireFunc(s.p, "ForEach", s.n, "f", f == nil)
	addPartitionOutput(s, "ForEach", opts, func(ctx context.Context, pt *parted[T], i int, st *partState) error {
		if st.iso != nil {
			return forEachIsolated(ctx, pt, i, st, f)
		}
		var err error
		pt.transient(i, func(_ int, c []T) bool {
			for _, v := range c {
				if st.calls < st.skip {
					st.calls++ // done by an earlier try
					continue
				}
				st.inF = true
				if err = f(ctx, v); err != nil {
					return false
				}
				st.inF = false
				st.calls++
			}
			return true
		})
		return err
	})
}

// forEachIsolated is ForEach's quarantine pass of partition i: the
// outputs of each root record are held until its processing is done, then
// given to f, so that a record that fails, in an operator before ForEach
// or in f, has none of its outputs given to f after the failure, nor
// before it when an operator failed. The calls earlier tries made are
// skipped, as in a try.
func forEachIsolated[T any](ctx context.Context, pt *parted[T], i int, st *partState, f func(ctx context.Context, v T) error) error {
	iso := st.iso
	var held []T
	var stop error // f failed because the Run stops
	iso.done = func() {
		for _, v := range held {
			if err := f(ctx, v); err != nil {
				if ctx.Err() != nil {
					stop = err
				} else {
					iso.fail(err) // its record is quarantined
				}
				break
			}
		}
		clear(held)
		held = held[:0]
	}
	iso.drop = func(int) { clear(held); held = held[:0] }
	defer func() { iso.done, iso.drop = nil, nil }()
	pt.transient(i, func(_ int, c []T) bool {
		for _, v := range c {
			if st.calls < st.skip {
				st.calls++ // done by an earlier try
				continue
			}
			st.calls++
			held = append(held, v)
		}
		return stop == nil
	})
	if stop == nil && len(held) > 0 {
		// Records no root yielded one at a time (none expected): given
		// to f all the same, a failure of f the partition's, never lost.
		for _, v := range held {
			if err := f(ctx, v); err != nil {
				return err
			}
		}
	}
	return stop
}

// ForEachPartition calls f with every partition of every batch of s (see
// Partition), empty partitions excepted: concurrently, at most
// Config.Parallelism calls at a time, so f must be safe for concurrent use.
// It is for outputs with a per-partition cost, such as a connection or a
// bulk write, and for per-shard processing: downstream of a source and
// narrow operators, a partition holds the records of one shard in the
// batch, in order. Errors, ctx and opts are handled as for ForEach, but a
// partition is tried again whole, and quarantined whole if f fails on it.
func ForEachPartition[T any](s *Stream[T], f func(ctx context.Context, p Partition[T]) error, opts ...Option) {
	mustExist("ForEachPartition", "s", s)
	requireFunc(s.p, "ForEachPartition", s.n, "f", f == nil)
	addPartitionOutput(s, "ForEachPartition", opts, func(ctx context.Context, pt *parted[T], i int, st *partState) error {
		part := Partition[T]{Time: pt.time, Index: i, Stream: pt.keys[i].stream, Shard: pt.keys[i].shard}
		if st.iso == nil {
			pt.each(i, func(_ int, c []T) bool {
				if len(c) > 0 {
					part.chunks = append(part.chunks, c)
				}
				return true
			})
			if len(part.chunks) == 0 {
				return nil
			}
			return f(ctx, part)
		}
		// The quarantine pass: the records the operators before it made
		// are isolated, and those a failing record made dropped; then a
		// failure of f is the partition's.
		iso := st.iso
		last, made := 0, 0 // the root record (iso.n) that made the last chunks, and how many
		iso.drop = func(int) {
			if last == iso.n {
				part.chunks, made = part.chunks[:len(part.chunks)-made], 0
			}
		}
		pt.each(i, func(_ int, c []T) bool {
			if len(c) > 0 {
				if last != iso.n {
					last, made = iso.n, 0
				}
				part.chunks = append(part.chunks, c)
				made++
			}
			return true
		})
		iso.drop = nil
		if len(part.chunks) == 0 {
			return nil
		}
		err := safely(func() error { return f(ctx, part) })
		if err == nil || ctx.Err() != nil {
			return err
		}
		st.iso.letters = append(st.iso.letters, lettersOf(part.All(), batch.SeqRange{Stream: part.Stream, Shard: part.Shard}, err)...)
		return nil
	})
}

// addPartitionOutput registers an output that runs f for every partition of
// each batch of s as parallel tasks, fused with the narrow operators before
// it, under its failure policy (see runParts).
func addPartitionOutput[T any](s *Stream[T], op string, opts []Option, f partFunc[T]) {
	addOutputRun(s, op, opts, func(o *output) func(r *run) error {
		return func(r *run) error { return runParts(r, o, s, f) }
	})
}

// ForEachBatch calls f with every batch of s, empty batches included, in
// batch-time order, from one goroutine: f sees the whole batch, in block
// order, once its partitions have been computed in parallel. With a
// recovery log (Config.Recovery), a batch that a crash interrupted runs
// again after the restart with the same Time, the same blocks and ranges
// and the same records, so an output keyed by the batch time (such as the
// sink/files package's) is exactly-once. Errors are handled as for ForEach,
// with the batch as the unit tried again and quarantined. Named, among
// opts, names the output in the pipeline's shape:
// ForEachBatch(s, f, stream.Named("files")); Origins, among opts, gives f
// each record's origin (see Origins).
func ForEachBatch[T any](s *Stream[T], f func(ctx context.Context, b *batch.Batch[T]) error, opts ...Option) {
	mustExist("ForEachBatch", "s", s)
	requireFunc(s.p, "ForEachBatch", s.n, "f", f == nil)
	addOutput(s, "ForEachBatch", opts, f)
}

// Print writes the first n records of every batch of s to the Pipeline's
// Config.Stdout, one per line with fmt's %v, under a header naming the batch
// time, followed by "..." if the batch has more and an empty line. It is for
// debugging and examples. A negative n is treated as 0. Named, among opts,
// names the output in the pipeline's shape.
func Print[T any](s *Stream[T], n int, opts ...Option) {
	mustExist("Print", "s", s)
	w := s.p.cfg.Stdout
	addOutput(s, "Print", opts, func(_ context.Context, b *batch.Batch[T]) error {
		var sb strings.Builder
		sb.WriteString("-------------------------------------------\n")
		fmt.Fprintf(&sb, "Time: %v\n", b.Time())
		sb.WriteString("-------------------------------------------\n")
		i := 0
		for v := range b.All() {
			if i == max(n, 0) {
				sb.WriteString("...\n")
				break
			}
			fmt.Fprintf(&sb, "%v\n", v)
			i++
		}
		sb.WriteString("\n")
		_, err := w.Write([]byte(sb.String()))
		return err
	})
}
