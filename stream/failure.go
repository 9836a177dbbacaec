package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/backoff"
	"github.com/weirstream/weir/internal/noretry"
	"github.com/weirstream/weir/internal/outputid"
	"github.com/weirstream/weir/source"
)

// DefaultRetries is how many times an output that fails in a batch is tried
// again, when no Retry option is given, before its failure policy gives up.
const DefaultRetries = 3

// retryBackoff spaces the tries of an output: the n-th wait (from 0) is
// random in [d/2, d], d = 1s*2^n, at most 30s; so the default 3 retries
// wait 0.5-1s, 1-2s and 2-4s, on Config.Clock.
var retryBackoff = backoff.Policy{Base: time.Second, Max: 30 * time.Second}

// Retry is an option of an output (ForEach, ForEachPartition, ForEachBatch,
// Print): when the output fails in a batch (its function returns an error
// or panics, or an operator's function does while the output computes its
// stream), what failed is tried again up to n times, with back-off (about
// 1s, 2s, 4s, ... up to 30s, jittered, on Config.Clock), before the
// output's failure policy gives up: it stops the pipeline (Run returns the
// *BatchError), or, with Quarantine, sends the failing records to dead
// letters. What is tried again is the unit that failed: for ForEach the
// partitions that failed, resuming each after the last record f accepted;
// for ForEachPartition the partitions that failed, whole; for ForEachBatch
// and Print the whole batch. n must be >= 0; 0 gives up at the first
// failure, as weir did before v0.3. Default DefaultRetries (3). A
// configuration an output of weir refuses once the pipeline runs (such as
// repartition.ByKey's, wrapping its ErrInvalidConfig) is the same at every
// try: it stops the pipeline at once, neither tried again nor quarantined.
func Retry(n int) Option {
	return func(o *options) { o.retries, o.given = &n, o.given|optRetry }
}

// Quarantine is an option of an output: once its retries (see Retry) are
// spent, the records that still fail are sent to d, each as a DeadLetter
// with the error, the panic's stack, the batch time and where the record
// was read, as far as the output knows it (see DeadLetter's Range: a
// record of a ForEachBatch with Origins names its origin), and the batch
// goes on and completes; without it, the failure
// stops the pipeline. Records are isolated one by one for ForEach and for
// the narrow operators (Map, Filter, FlatMap, MapBatch) whose functions run
// in the output's partitions: the failing partitions run again record by
// record, in order, skipping the records ForEach has already output, and
// each record whose processing fails is quarantined alone (ForEach may
// have given f some of its outputs: see ForEach). The unit is the
// partition for a ForEachPartition function that fails, and the batch for
// a ForEachBatch or Print function that fails, unless a ForEachBatch
// function names the records it cannot output with a RecordErrors (as
// sink/kinesis and sink/dynamodb do): those records are quarantined at
// once, each with its own error, and it is called again with the others.
// When the narrow operators before a ForEachBatch or Print fail, their
// records are isolated the same way and the function gets the batch of
// the others (none of a failing record's outputs), with Origins the
// origins a run without the failure gives them. A narrow operator
// whose stream several consumers share is computed once, before them; if
// it fails, the quarantine pass of an output runs it again fused into the
// output, record by record, so each such output quarantines the failing
// records. A failure the output cannot pin to its records (of
// a keyed, window, state or Transform operator, or of a source's
// recomputation) is not quarantined by the output (the operator's own
// Quarantine, below, can, but a source's cannot): it stops the pipeline
// once the retries are spent. Later records of the key
// of a quarantined record go on: they are not held back, so a record
// replayed from dead letters arrives after them. See DESIGN.md, Failure
// model.
//
// Quarantine is also an option of the keyed, window and state operators
// (ReduceByKey, CountByValue, Window, ReduceByKeyAndWindow,
// UpdateStateByKey, MapWithState), for the functions that run before
// they group records: the narrow operators fused into their map side (a
// Map, Filter, FlatMap or MapBatch), and the reduce of ReduceByKey or a
// windowed reduce. When one panics, the batch is computed again with the
// records isolated one by one, as above; each record whose processing
// fails is sent to d, and the operator computes the batch from the
// others, none of a failing record's outputs included (except, when the
// reduce itself panics on one of a record's outputs, those it combined
// before). A narrow operator whose stream other consumers share too is
// computed once, before them; it is planned again fused and isolated the
// same way. An operator's Quarantine sends them to d at once, without a
// try again first, as such functions are deterministic; a narrow
// operator fused into an output is the output's, tried again first as
// its Retry says (above).
//
// A windowed reduce quarantines a record once, when its batch is reduced,
// not once per window; a restart that replays completed batches to
// rebuild the state leaves the same records out without sending their
// letters again. With Quarantine, a panic of MapWithState's f on a record
// quarantines that record, the key's state as it was before the call; a
// panic of UpdateStateByKey's update quarantines the key's values of the
// batch (as pairs: they have been grouped), the key keeping the state it
// had. An update that panics on a key without values in the batch, a
// timing-out call of f that panics, and an error of State misuse have no
// record to set aside: they still stop the pipeline.
//
// Transform takes Quarantine too. Its f sees a whole batch, so the unit is
// the batch: when f panics, every record of the batch is sent to d, with
// the panic, and Transform's batch is empty; a narrow operator before it
// that fails has its records isolated one by one, as for a Window. An
// error f returns is not quarantined: the outputs try the batch again.
func Quarantine(d DeadLetters) Option {
	return func(o *options) { o.dead, o.quarantine, o.given = d, true, o.given|optQuarantine }
}

// DeadLetters receives the records an output quarantines (see
// Quarantine). The sink/deadletter package keeps them in a directory,
// sink/deadletter/dynamodb in a DynamoDB table and sink/deadletter/kinesis
// in a Kinesis stream.
type DeadLetters interface {
	// Quarantine makes letters durable and returns nil only once they are:
	// the batch completes after it returns. It is called from the
	// driver's goroutine, once per batch and output that quarantined
	// records, with all of them, which share Time and Output and are
	// numbered by Index from 0. A batch recomputed after a crash calls it
	// again for the same Time and Output, with the same letters if the
	// functions are deterministic, or with others (a flaky downstream
	// failing other records): it must keep every letter of the last call,
	// and not keep a letter twice. Letters of the earlier call that the
	// last one lacks may be replaced (sink/deadletter) or kept
	// (sink/deadletter/dynamodb and sink/deadletter/kinesis, which tell
	// letters by their records). An error fails the batch, as the output's
	// own failure would without Quarantine.
	Quarantine(ctx context.Context, letters []DeadLetter) error
}

// DeadLetter is a record an output quarantined: the record, why it failed,
// and where it came from.
type DeadLetter struct {
	// Time is the batch time.
	Time batch.Time `json:"time"`
	// Output is the output's index in declaration order, as in the
	// pipeline's Shape, and OutputName describes it as errors do:
	// `ForEach("mail") of Map (stream 1)`. For a keyed, window, state or
	// Transform operator with Quarantine, Output is the number of the pipeline's
	// outputs plus the operator's position among such operators, in
	// declaration order (the first is numbered as an output after the
	// last), and OutputName names the operator: `ReduceByKey (stream 3)`.
	Output     int    `json:"output"`
	OutputName string `json:"outputName"`
	// Index is the letter's position among those of its batch and output,
	// from 0, in partition order and, within a partition, in record order.
	Index int `json:"index"`
	// Range and Offset say where the record was read. For a record
	// isolated by ForEach or a narrow operator, Record is the source's
	// record, as read, Range the source range it was read in and Offset
	// its position in it, from 0. For a record of a ForEachBatch output's
	// batch with origins (see Origins) that its function failed on (a
	// RecordErrors naming it, or an error or panic quarantining the batch),
	// Record is the output's and they name its origin, the source record
	// it was made of, as a range of that record's sequence number: Range
	// has the origin's Stream and Shard, First and Last its Seq and Count
	// its SubSeq plus 1, and Offset is its SubSeq (0 for a plain Kinesis
	// record, the sub-record's place in a KPL aggregate, whose records
	// share the sequence number). The records a FlatMap made of one source
	// record have the same. Otherwise the record is not a source's
	// (quarantined by ForEachPartition, or by ForEachBatch without
	// origins, or downstream of an operator that is not narrow): Record is
	// the output's, Range names at most the partition's Stream and Shard,
	// Range.First is "" and Offset 0.
	Range  batch.SeqRange `json:"range"`
	Offset int            `json:"offset"`
	// Record is the record's encoding, as Encoding says: "raw" for a
	// []byte or a string, as it is; "json" for another type
	// (encoding/json); "fmt" for one JSON refuses, fmt's %v, which may not
	// be decodable.
	Record   []byte `json:"record"`
	Encoding string `json:"encoding"`
	// Err is the error's text; for a panic, "panic: " and the value.
	Err string `json:"err"`
	// Panic is fmt's %v of the value a function panicked with, and Stack
	// the stack of the goroutine that panicked; both "" for an error.
	Panic string `json:"panic,omitempty"`
	Stack string `json:"stack,omitempty"`
}

// failurePolicy is what an output does when it fails: try again retries
// times, then quarantine to dead, or stop if dead is nil.
type failurePolicy struct {
	retries int
	dead    DeadLetters
}

// policyOf returns the failure policy opts give output o, and records a
// graph error for a bad one.
func policyOf(p *Pipeline, o *output, opts options) failurePolicy {
	pol := failurePolicy{retries: DefaultRetries, dead: opts.dead}
	if opts.retries != nil {
		pol.retries = *opts.retries
	}
	if pol.retries < 0 {
		p.graphError(fmt.Errorf("%v: Retry(%d): must be >= 0 (0 gives up at the first failure)", o, pol.retries))
	}
	switch {
	case opts.quarantine && opts.dead == nil:
		p.graphError(fmt.Errorf("%v: Quarantine(nil): pass the DeadLetters to send failing records to", o))
	case opts.quarantine && nilPointer(opts.dead):
		// It would panic when records fail, and stop the pipeline then
		// instead of quarantining them.
		p.graphError(fmt.Errorf("%v: Quarantine(nil %T): pass the DeadLetters to send failing records to", o, opts.dead))
	}
	return pol
}

// OutputInfo tells a Listener what an output's failure policy did in a
// batch (see Retry and Quarantine).
type OutputInfo struct {
	// Output describes the output as errors do: `ForEach("mail") of Map
	// (stream 1)`, as a DeadLetter's OutputName does, or the keyed, window,
	// state or Transform operator with Quarantine: `ReduceByKey (stream 3)`. Its index,
	// which a DeadLetter's Output holds, is its place in BatchInfo.Outputs.
	Output string
	// Retries counts the units tried again: partitions for ForEach and
	// ForEachPartition, the whole output otherwise.
	Retries int
	// Quarantined counts the records sent to the output's dead letters.
	Quarantined int
}

// retry runs attempt, and again after a back-off while it fails, up to the
// policy's retries, and returns its last error. Before each new attempt
// the failed streams of the batch are forgotten, so that they are computed
// again. It gives up early, returning the error, when the Run stops.
// units counts what a new attempt retries.
func (o *output) retry(r *run, attempt func() error, units func() int) error {
	b := retryBackoff.Start()
	for {
		err := attempt()
		if err == nil || r.ctx.Err() != nil || b.Attempts() >= o.policy.retries {
			return err
		}
		if _, ok := errors.AsType[*recomputeError](err); ok {
			return err // a source's failure: not the output's to retry
		}
		if noretry.Is(err) {
			return err // a refused configuration: the same at every try
		}
		if _, ok := errors.AsType[*refusal](err); ok {
			return err // records that can never be output: the same at every try
		}
		r.outs[o.index].Retries += units()
		wait := b.Next()
		r.logger.Warn("stream: output failed; trying again", "output", o.String(), "batch", r.job.time,
			"retry", b.Attempts(), "of", o.policy.retries, "wait", wait, "err", err)
		if clock.Sleep(r.ctx, r.clk, wait) != nil {
			return err // the Run stops
		}
		r.forgetFailures()
	}
}

// forgetFailures drops the failed results of r's streams, so that an output
// tried again computes them again.
func (r *run) forgetFailures() {
	for i, m := range r.memo {
		if f, ok := m.(interface{ failed() bool }); ok && f.failed() {
			r.memo[i] = nil
		}
	}
}

func (m *result[T]) failed() bool { return m.err != nil }

// quarantine sends letters, which o's last attempt left failing in r's
// batch, to o's dead letters, numbered, and counts them.
func (o *output) quarantine(r *run, letters []DeadLetter) error {
	if len(letters) == 0 {
		return nil
	}
	for i := range letters {
		letters[i].Time, letters[i].Output, letters[i].OutputName, letters[i].Index = r.job.time, o.index, o.String(), i
	}
	if err := o.policy.dead.Quarantine(r.ctx, letters); err != nil {
		return fmt.Errorf("quarantine %d records: %w", len(letters), err)
	}
	r.outs[o.index].Quarantined += len(letters)
	r.logger.Warn("stream: records quarantined", "output", o.String(), "batch", r.job.time,
		"records", len(letters), "err", letters[0].Err)
	return nil
}

// context returns the context o's function is given in r: r's, which
// carries the Run's name (internal/runname), and o's index
// (internal/outputid), so that a sink told two outputs apart.
func (o *output) context(r *run) context.Context { return outputid.With(r.ctx, o.index) }

// runWhole runs an output whose unit is the batch (ForEachBatch, Print)
// under its failure policy: f with each try's batch of s.
func runWhole[T any](r *run, o *output, s *Stream[T], f func(ctx context.Context, b *batch.Batch[T]) error) error {
	ctx := o.context(r)
	var withOrigins *batch.Batch[T] // kept across tries: computed once
	var fFailed bool                // the last try failed in f, not computing s
	err := o.retry(r, func() error {
		var b *batch.Batch[T]
		var err error
		fFailed = false
		switch {
		case !o.origins:
			b, err = s.at(r)
		case withOrigins != nil:
			b = withOrigins
		default:
			b, err = originBatch(r, s)
			withOrigins = b
		}
		if err != nil || b == nil {
			return err
		}
		err = refusing(safely(func() error { return f(ctx, b) }))
		fFailed = err != nil
		return err
	}, func() int { return 1 })
	if err == nil || r.ctx.Err() != nil || noretry.Is(err) {
		return err
	}
	if o.policy.dead == nil {
		if pt, _, _ := fusedAgain(r, s); fFailed || pt != nil {
			// The function, or a narrow operator's, failed: Quarantine
			// would isolate its records.
			return fmt.Errorf("%w (%s)", err, stopFix)
		}
		return err
	}
	if fFailed {
		b := withOrigins
		if b == nil {
			b, _ = s.at(r) // computed by the try
		}
		letters, err := refusedLetters(b, err, callAgain(ctx, r, o, f), stopsOutput(r))
		if err != nil {
			return err
		}
		return o.quarantine(r, letters)
	}
	// The stream itself failed: if it is a narrow operator's, its records
	// are isolated and f gets the batch of those that did not fail, with
	// their origins for an output with Origins.
	var b *batch.Batch[T]
	var letters []DeadLetter
	if o.origins {
		b, letters = isolatedOriginBatch(r, s)
	} else {
		b, letters = isolatedBatch(r, s)
	}
	if b == nil {
		return err
	}
	if ferr := safely(func() error { return f(ctx, b) }); ferr != nil {
		refused, err := refusedLetters(b, ferr, callAgain(ctx, r, o, f), stopsOutput(r))
		if err != nil {
			return err
		}
		letters = append(letters, refused...)
	}
	return o.quarantine(r, letters)
}

// isolatedBatch computes again the batch of s, a narrow operator's stream
// that failed as a whole, with the records of its chains' roots isolated
// one at a time (see isolation): it returns the batch of the records whose
// processing did not fail, and a letter for each of the others. It returns
// a nil batch if s fails again as a whole (see fusedAgain).
func isolatedBatch[T any](r *run, s *Stream[T]) (*batch.Batch[T], []DeadLetter) {
	pt, _, _ := fusedAgain(r, s)
	if pt == nil {
		return nil, nil
	}
	if pt.data != nil {
		return pt.batch(), nil // computed before: nothing to isolate
	}
	// As pt.compute, on this goroutine (one isolation), knowing which
	// chunks each root record made.
	iso := &isolation{}
	data := make([][]chunk[T], len(pt.keys))
	last, made := 0, 0 // the root record (iso.n) that made the last chunks, and how many
	iso.drop = func(i int) {
		if last == iso.n {
			data[i], made = data[i][:len(data[i])-made], 0
		}
	}
	r.iso.Store(iso)
	defer r.iso.Store(nil)
	err := parallel(r.ctx, 1, len(pt.keys), func(_ context.Context, i int) error {
		pt.each(i, func(pos int, recs []T) bool {
			if len(recs) > 0 {
				if last != iso.n {
					last, made = iso.n, 0
				}
				data[i] = append(data[i], chunk[T]{pos, recs})
				made++
			}
			return true
		})
		return nil
	})
	if err != nil {
		return nil, nil
	}
	return computed(pt.time, pt.blocks, pt.keys, pt.npos, data).batch(), iso.letters
}

// partState is one partition's progress through the tries of an output.
type partState struct {
	// skip is how many calls of a ForEach function earlier tries made
	// successfully, in order: a new try resumes after them. calls counts
	// those of the current try, skipped ones included.
	skip, calls int
	// iso is set for the quarantine pass: then the partition's records run
	// one at a time, and those that fail become letters.
	iso *isolation
	// inF is set by ForEach while its function runs on, or has failed
	// on, the record of index calls: so a try that failed with inF set
	// failed on that record (see where).
	inF bool
	// running is set while the partition runs, for the still-running
	// warning (see progress).
	running atomic.Bool
}

// partFunc runs partition i of pt for an output, one try of it.
type partFunc[T any] func(ctx context.Context, pt *parted[T], i int, st *partState) error

// runParts runs an output whose unit is the partition (ForEach,
// ForEachPartition) under its failure policy: f for every partition of s,
// then again for the partitions that failed, until none fails or the
// retries are spent; then, with Quarantine, the failed ones once more,
// record by record (see isolation).
func runParts[T any](r *run, o *output, s *Stream[T], f partFunc[T]) error {
	var (
		pt     *parted[T]
		states []partState
		errs   []error
		todo   []int
	)
	err := o.retry(r, func() error {
		if pt == nil {
			p, err := s.parts(r)
			if err != nil || p == nil {
				return err
			}
			pt, states, errs = p, make([]partState, len(p.keys)), make([]error, len(p.keys))
			r.progress.parts(pt.keys, states)
			todo = make([]int, len(p.keys))
			for i := range todo {
				todo[i] = i
			}
		}
		// Each partition's failure is its own: the others go on.
		err := parallel(o.context(r), r.par, len(todo), func(ctx context.Context, k int) error {
			i := todo[k]
			st := &states[i]
			st.calls, st.inF = 0, false
			st.running.Store(true)
			errs[i] = safely(func() error { return f(ctx, pt, i, st) })
			st.running.Store(false)
			st.skip = max(st.skip, st.calls)
			return nil
		})
		if err != nil {
			return err
		}
		failed := todo[:0]
		for _, i := range todo {
			if errs[i] != nil {
				failed = append(failed, i)
			}
		}
		todo = failed
		if len(todo) > 0 {
			return errs[todo[0]]
		}
		return nil
	}, func() int { return max(len(todo), 1) })
	if err == nil || r.ctx.Err() != nil || noretry.Is(err) {
		return err
	}
	whole := pt == nil // s failed as a whole, before f ran
	if whole {
		pt, states, todo = fusedAgain(r, s)
	}
	if pt == nil || len(todo) == 0 {
		return err
	}
	if o.policy.dead == nil {
		if whole { // a narrow operator's stream: no partition to name
			return fmt.Errorf("%w (%s)", err, stopFix)
		}
		if at := pt.where(todo[0], &states[todo[0]]); at != "" {
			return fmt.Errorf("%s: %w (%s)", at, err, stopFix)
		}
		return fmt.Errorf("%w (%s)", err, stopFix)
	}
	// The quarantine pass: one partition at a time, on this goroutine, so
	// that the roots of the chains (see parted.isolated) share one
	// isolation.
	iso := &isolation{}
	r.iso.Store(iso)
	defer r.iso.Store(nil)
	if whole {
		r.progress.parts(pt.keys, states)
	}
	for _, i := range todo {
		st := &states[i]
		st.calls, st.iso = 0, iso
		st.running.Store(true)
		err := safely(func() error { return f(o.context(r), pt, i, st) })
		st.running.Store(false)
		if err != nil {
			return err
		}
	}
	return o.quarantine(r, iso.letters)
}

// fusedAgain returns, for the quarantine pass of an output whose stream s
// failed as a whole, s's partitions planned again with the narrow
// operators that failed fused into the output, and every partition to
// run: a narrow operator's stream several consumers share (s or one
// before it) is computed once, before them, so its failure could not be
// pinned to records; fused, the pass runs its function record by record,
// as for a stream of one consumer. It returns nil if s failed as a whole
// otherwise (a keyed, window, state or Transform operator, a source's
// recomputation): then the quarantine pass cannot isolate records. It
// plans only: what the failed try computed is not computed again.
func fusedAgain[T any](r *run, s *Stream[T]) (*parted[T], []partState, []int) {
	r.isolating = true
	pt, err := s.parts(r)
	r.isolating = false
	if err != nil || pt == nil {
		return nil, nil, nil
	}
	todo := make([]int, len(pt.keys))
	for i := range todo {
		todo[i] = i
	}
	return pt, make([]partState, len(pt.keys)), todo
}

// isolation is the quarantine pass of an output's failed partitions. While
// it is the run's (run.iso), the roots of the partitions' chains (see parted.isolated) yield
// their records one at a time and recover the failure of each, which
// becomes a letter. Only the driver's goroutine uses it.
type isolation struct {
	failure error // set by fail for the record being processed
	letters []DeadLetter
	// n counts the roots' records yielded so far, the one being processed
	// included; drop, if set, is called when the processing of record n of
	// partition i failed, so that a consumer that keeps the records it is
	// given (a batch's) drops those it took of it: none of a failing
	// record's outputs is output.
	n    int
	drop func(i int)
	// done, if set, is called when record n was processed without
	// failing so far, still as its processing: a consumer that holds a
	// record's outputs (ForEach's) outputs them then, and a failure of
	// its function is the record's.
	done func()
}

// fail records err as the failure of the record being processed: for an
// output's function that returned err, as a panic would fail it.
func (iso *isolation) fail(err error) {
	if iso.failure == nil {
		iso.failure = err
	}
}

// isolated is parted's each in the quarantine pass: it yields the records
// of partition i one at a time, and turns the failure of each (a panic, or
// an error an output reports with fail) into a letter, going on with the
// next record.
func (pt *parted[T]) isolated(iso *isolation, i int, yield func(int, []T) bool) bool {
	n := -1
	for _, c := range pt.data[i] {
		for k := range c.recs {
			n++
			if !pt.try(iso, i, n, c.pos, c.recs[k:k+1:k+1], yield) {
				return false
			}
		}
	}
	return true
}

// try yields one, record n of partition i, alone, in the quarantine pass,
// and reports whether to go on: what yield returned, or true if the
// record's processing failed; then the record's letter is added to iso,
// and iso.drop, if set, is called to drop what the consumer took of it.
func (pt *parted[T]) try(iso *isolation, i, n, pos int, one []T, yield func(int, []T) bool) bool {
	iso.n++
	iso.failure = nil
	cont := true
	err := safely(func() error {
		cont = yield(pos, one)
		if iso.done != nil {
			iso.done()
		}
		return nil
	})
	if err == nil {
		err = iso.failure
	}
	if err == nil {
		return cont
	}
	rg, off := pt.origin(i, n)
	l := letterOf(one[0], err)
	l.Range, l.Offset = rg, off
	iso.letters = append(iso.letters, l)
	if iso.drop != nil {
		iso.drop(i)
	}
	return true
}

// origin returns the range record n of partition i was read in, and its
// offset there, for a source's partitions; otherwise the partition's
// stream and shard only, if it is one shard's.
func (pt *parted[T]) origin(i, n int) (batch.SeqRange, int) {
	k := pt.keys[i]
	shard := batch.SeqRange{Stream: k.stream, Shard: k.shard}
	if !pt.ranged || k.shard == "" {
		return shard, 0
	}
	// The order of shardParts: blocks in order, ranges in order.
	for _, b := range pt.blocks {
		if !rangesCover(b.Ranges, b.Count) {
			continue
		}
		for _, rg := range b.Ranges {
			if rg.Stream != k.stream || rg.Shard != k.shard {
				continue
			}
			if n < rg.Count {
				return rg, n
			}
			n -= rg.Count
		}
	}
	return shard, 0
}

// stopFix ends the error of an output whose failure stops the pipeline
// because it has no Quarantine, when Quarantine would have isolated the
// failing records (the output's function or a narrow operator's failed):
// what the user can do about it.
const stopFix = "to set the records that fail aside and go on, give the output stream.Quarantine(d); " +
	"otherwise fix the function or the record: the batch is not completed, so its records are processed again after a restart"

// mapTaskError returns err, the failure of map task i of a keyed, window
// or state operator over pt (a panic: of a narrow operator's function
// fused into the task, or of the operator's own), naming the records of
// the partition and the fix: the operator's own Quarantine (not an
// output's) can isolate records there; without it, the error is all a
// user has to find the record by. nil stays nil. The error is a
// *mapTaskFailure, which the operator's Quarantine isolates.
func (pt *parted[T]) mapTaskError(i int, err error) error {
	if err == nil {
		return nil
	}
	at := pt.where(i, &partState{})
	if at == "" {
		at = fmt.Sprintf("partition %d", i)
	}
	return &mapTaskFailure{err: err, msg: fmt.Sprintf("%v; on %s: %s", err, at, keyedStopFix)}
}

// keyedStopFix ends mapTaskError's error: what failed, and what the user
// can do about it.
const keyedStopFix = "a function run on the records before the operator groups them failed " +
	"(a Map, Filter, FlatMap or MapBatch fused into it, or its own reduce); " +
	"to set the records that fail aside and go on, give the operator stream.Quarantine(d); " +
	"otherwise fix the function or the record (a function can drop a record it cannot process, with Filter or FlatMap): " +
	"the batch is not completed, so its records are processed again after a restart"

// where names, for the error that stops the pipeline, where partition i
// of pt failed its output: its shard, "" if it is not one shard's; the
// record when the output's own function failed on a record of a source's
// partition (its sequence number if it is a source.Positioned, else its
// offset in its range); otherwise the sequence numbers of the shard in
// the batch.
func (pt *parted[T]) where(i int, st *partState) string {
	k := pt.keys[i]
	if k.shard == "" {
		return ""
	}
	at := fmt.Sprintf("shard %s of stream %s", k.shard, k.stream)
	if st.inF && pt.ranged {
		if seq, sub, ok := pt.positionAt(i, st.calls); ok {
			return fmt.Sprintf("%s, record of sequence number %s, sub-sequence %d", at, seq, sub)
		}
		if rg, off := pt.origin(i, st.calls); rg.First != "" {
			return fmt.Sprintf("%s, the record at offset %d of range %s-%s", at, off, rg.First, rg.Last)
		}
	}
	var first, last string
	for _, b := range pt.blocks {
		for _, rg := range b.Ranges {
			if rg.Stream == k.stream && rg.Shard == k.shard {
				if first == "" {
					first = rg.First
				}
				last = rg.Last
			}
		}
	}
	if first == "" {
		return at
	}
	return fmt.Sprintf("%s, a record of sequence numbers %s to %s", at, first, last)
}

// positionAt returns the position of record n of partition i of pt, a
// computed one, if its records are source.Positioned.
func (pt *parted[T]) positionAt(i, n int) (seq string, sub int64, ok bool) {
	if pt.data == nil {
		return "", 0, false
	}
	for _, c := range pt.data[i] {
		if n < len(c.recs) {
			p, ok := any(&c.recs[n]).(source.Positioned)
			if !ok {
				return "", 0, false
			}
			seq, sub = p.Position()
			return seq, sub, true
		}
		n -= len(c.recs)
	}
	return "", 0, false
}

// lettersOf returns a letter for each of recs, with the failure err, from
// range rg. The letters share the failure's text and stack: made once, not
// once per record (a failing batch of many records would hold as many
// copies).
func lettersOf[T any](recs iter.Seq[T], rg batch.SeqRange, err error) []DeadLetter {
	var out []DeadLetter
	failure := failureLetter(err)
	failure.Range = rg
	for v := range recs {
		l := failure
		l.Record, l.Encoding = encodeRecord(v)
		out = append(out, l)
	}
	return out
}

// letterOf returns the letter of record v that failed with err.
func letterOf(v any, err error) DeadLetter {
	l := failureLetter(err)
	l.Record, l.Encoding = encodeRecord(v)
	return l
}

// failureLetter returns a letter holding the failure err, without record.
func failureLetter(err error) DeadLetter {
	l := DeadLetter{Err: err.Error()}
	if pe, ok := errors.AsType[*panicError](err); ok {
		l.Panic, l.Stack = fmt.Sprint(pe.Value), string(pe.Stack)
	}
	return l
}

// encodeRecord encodes v for a letter: a []byte or a string as it is,
// another type in JSON, or with fmt if JSON fails (or panics, in a
// MarshalJSON method).
func encodeRecord(v any) ([]byte, string) {
	switch x := v.(type) {
	case []byte:
		return append([]byte(nil), x...), "raw"
	case string:
		return []byte(x), "raw"
	}
	var b []byte
	if err := safely(func() (err error) { b, err = json.Marshal(v); return err }); err == nil {
		return b, "json"
	}
	return fmt.Appendf(nil, "%v", v), "fmt"
}

// keyPanic returns the error that fails a batch when a state operator's
// function, called on the driver for key k (of shard, if known), panicked
// with pe and nothing set the call aside: pe, the key, and fix. It wraps
// pe, so the BatchError has the panic's value and stack.
func keyPanic[K any](k K, shard string, pe *panicError, fix string) error {
	key := fmt.Sprint(k)
	if len(key) > maxKeyText {
		key = strings.ToValidUTF8(key[:maxKeyText], "") + "…"
	}
	at := fmt.Sprintf("key %q", key)
	if shard != "" {
		at += " (a record of shard " + shard + ")"
	}
	return fmt.Errorf("%w; on %s: %s", pe, at, fix)
}

// maxKeyText is the most of a key keyPanic writes.
const maxKeyText = 200

// updateFix ends the error of an UpdateStateByKey whose update panicked on
// a key with values in the batch (withValues) or without.
func updateFix(withValues bool) string {
	if !withValues {
		return "update panicked on the key, which had state and no values in the batch: Quarantine cannot set it aside, as no record is to blame; " +
			"fix update: the batch is not completed, so it runs again after a restart"
	}
	return "update panicked on the key's values of the batch; to set them aside and go on (the key keeps its state), " +
		"give UpdateStateByKey stream.Quarantine(d); otherwise fix update or the records: " +
		"the batch is not completed, so its records are processed again after a restart"
}

// mapWithStateFix ends the error of a MapWithState whose f panicked on a
// record.
const mapWithStateFix = "f panicked on a record of the key; to set the records f panics on aside and go on " +
	"(the key's state as before the call), give MapWithState stream.Quarantine(d); otherwise fix f or the record: " +
	"the batch is not completed, so its records are processed again after a restart"

// timeoutFix ends the error of a MapWithState whose f panicked on a key
// timing out.
const timeoutFix = "f panicked on the key timing out (StateTimeout): Quarantine cannot set it aside, as no record is to blame; " +
	"fix f: the batch is not completed, so it runs again after a restart"
