package stream_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/sink/files"
	"github.com/weirstream/weir/source"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/stream/internal/recoverycheck"
)

// durable is what survives a crash of the pipeline: the records put on the
// stream, and the recovery log.
type durable struct {
	log   *recoverylog.MemoryStore
	out   string              // the directory of the files sink
	sink  *files.Sink[string] // the last run's: a restart closes it, as the crash of its process would
	calls [][]string          // the records of each Push, in order
	n     int                 // records produced so far
}

// replay is the receiver of one run of a pipeline. It plays the part of a
// Kinesis stream that outlives the process: a fresh memory.Source given
// every Push made so far, in the same order, so its sequence numbers are
// those of earlier runs and Recompute serves their ranges; like a
// restarted Kinesis receiver, it delivers only the records after
// source.Runtime.ResumeAfter.
type replay struct {
	*memory.Source[string]
	d *durable
	// onRecompute, if set, is called at the first Recompute.
	onRecompute func()
	recomputed  sync.Once // Recompute is called concurrently
	// recomputeErr, if set, is what every Recompute returns.
	recomputeErr error
}

// Recompute calls onRecompute the first time, then the memory source's.
func (r *replay) Recompute(ctx context.Context, info batch.BlockInfo) ([]string, error) {
	if r.onRecompute != nil {
		r.recomputed.Do(r.onRecompute)
	}
	if r.recomputeErr != nil {
		return nil, r.recomputeErr
	}
	return r.Source.Recompute(ctx, info)
}

func newReplay(t *testing.T, d *durable) *replay {
	t.Helper()
	src, err := memory.New[string](memory.Config{Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range d.calls {
		src.Push(c...)
	}
	return &replay{Source: src, d: d}
}

// Describe names the receiver in the pipeline's shape.
func (r *replay) Describe() (kind, name string) { return "memory", "replay" }

// produce puts records on the stream; the source receives them if it runs.
func (r *replay) produce(recs ...string) {
	r.d.calls = append(r.d.calls, recs)
	r.Source.Push(recs...)
}

// Start starts the memory source with a push that drops the ranges at or
// before the resume point of their shard.
func (r *replay) Start(ctx context.Context, rt source.Runtime[string]) error {
	resume, push := rt.ResumeAfter, rt.Push
	if resume != nil {
		rt.Push = func(ctx context.Context, b source.Block[string]) (batch.BlockInfo, error) {
			var keep source.Block[string]
			off := 0
			for _, rg := range b.Ranges {
				recs := b.Records[off : off+rg.Count]
				off += rg.Count
				if seq, ok := resume(rg.Stream, rg.Shard); ok && batch.CompareSeq(rg.First, seq) <= 0 {
					continue
				}
				keep.Ranges = append(keep.Ranges, rg)
				keep.Records = append(keep.Records, recs...)
			}
			if len(keep.Ranges) == 0 {
				return batch.BlockInfo{}, nil
			}
			return push(ctx, keep)
		}
	}
	return r.Source.Start(ctx, rt)
}

// counting the non-empty batches that output saw, this one included.
type hooks struct {
	out   func(ctx context.Context, i, n int, b *batch.Batch[string]) error
	clock clock.Clock // the pipeline's, if set
	// maxPending, if not 0, bounds the batches waiting for the running one
	// (stream.WithMaxPendingBatches).
	maxPending int
}

// pipeline builds the test pipeline on d: the replay source and three
// outputs, the first recording what it sees in rl, the third writing each
// batch to a file in d.out.
func pipeline(t *testing.T, d *durable, rl *recoverycheck.Recorder, h hooks) (*stream.Pipeline, *replay) {
	t.Helper()
	cfg := stream.Config{
		BatchInterval: time.Second,
		Recovery:      d.log,
		CompactEvery:  3,
		Listeners:     []stream.Listener{rl},
		Clock:         h.clock,
	}
	if h.maxPending > 0 {
		cfg = stream.WithMaxPendingBatches(cfg, h.maxPending)
	}
	p, err := stream.NewPipeline(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src := newReplay(t, d)
	s := stream.From(p, src)
	for i, name := range []string{"collect", "second"} {
		n := 0
		stream.ForEachBatch(s, func(ctx context.Context, b *batch.Batch[string]) error {
			if i == 0 {
				rl.See(b)
			}
			if b.Len() > 0 {
				n++
			}
			if h.out == nil {
				return nil
			}
			return h.out(ctx, i, n, b)
		}, stream.Named(name))
	}
	if d.sink != nil {
		d.sink.Close()
	}
	sink, err := files.New(files.Config[string]{Dir: d.out})
	if err != nil {
		t.Fatal(err)
	}
	d.sink = sink
	stream.ForEachBatch(s, sink.Write, stream.Named("files"))
	return p, src
}

// produceUntil puts a Push of three records on the stream every 100ms until
// Run returns or n pushes are made, then returns Run's error.
func produceUntil(d *durable, src *replay, n int, errc <-chan error) error {
	for range n {
		select {
		case err := <-errc:
			return err
		default:
		}
		src.produce(d.record(), d.record(), d.record())
		time.Sleep(100 * time.Millisecond)
	}
	return <-errc
}

func (d *durable) record() string {
	d.n++
	return "r" + strconv.Itoa(d.n)
}

var errCrash = errors.New("crash")

// crashCase is a crash injected into the first run.
type crashCase struct {
	name string
	// setup installs the crash; stop stops the first run now (Stop), as a
	// crash would.
	setup func(d *durable, stop func()) hooks
	// wantErr, if set, must be wrapped by the first Run's error.
	wantErr error
	// mayLeaveNothing is set for a crash that can leave nothing to recover
	// (every logged batch completed, every logged block allocated),
	// depending on how the receiver's pushes interleave with it.
	mayLeaveNothing bool
	// produce, if set, puts records on the stream in the first run until
	// it returns, and returns its error, instead of produceUntil; the
	// second run then idles a while before its records.
	produce func(d *durable, src *replay, errc <-chan error) error
}

// nthAppend returns an append hook that fails the n-th append of an entry
// of kind k, keeping keep of its entries, and stops the run if stop is not
// nil.
func nthAppend(k recoverylog.Kind, n, keep int, stop func()) recoverylog.AppendHook {
	seen := 0
	return func(_ int, entries []recoverylog.Entry) recoverylog.Fault {
		if entries[0].Kind != k {
			return recoverylog.Fault{}
		}
		if seen++; seen != n {
			return recoverylog.Fault{}
		}
		if stop != nil {
			stop()
		}
		return recoverylog.Fault{Err: errCrash, Keep: keep}
	}
}

func crashCases() []crashCase {
	stopIn := func(output, at int, delay time.Duration) func(*durable, func()) hooks {
		return func(_ *durable, stop func()) hooks {
			return hooks{out: func(ctx context.Context, i, n int, b *batch.Batch[string]) error {
				time.Sleep(delay) // slower than the batch interval: batches queue up
				if i == output && n == at {
					stop()
					return ctx.Err()
				}
				return nil
			}}
		}
	}
	logFault := func(k recoverylog.Kind, n, keep int, withStop bool) func(*durable, func()) hooks {
		return func(d *durable, stop func()) hooks {
			if !withStop {
				stop = nil
			}
			d.log.SetAppendHook(nthAppend(k, n, keep, stop))
			return hooks{}
		}
	}
	return []crashCase{
		{name: "stop in first output after ten batches", setup: stopIn(0, 10, 200*time.Millisecond)},
		{name: "stop in first output, batches queued", setup: stopIn(0, 3, 1500*time.Millisecond)},
		{name: "stop between outputs", setup: stopIn(1, 2, 1500*time.Millisecond)},
		{name: "crash at completion append", setup: logFault(recoverylog.KindBatchCompleted, 3, 0, true)},
		{name: "completion append fails", setup: logFault(recoverylog.KindBatchCompleted, 3, 0, false), wantErr: errCrash},
		{name: "completion appended, reported failed", setup: logFault(recoverylog.KindBatchCompleted, 3, 1, false), wantErr: errCrash, mayLeaveNothing: true},
		// A batch with records is allocated by its blocks' entries (no
		// entry of its own): the block cases are its allocation's.
		{name: "block append fails", setup: logFault(recoverylog.KindBlockStored, 12, 0, false), wantErr: errCrash},
		{name: "block appended, reported failed", setup: logFault(recoverylog.KindBlockStored, 12, 1, false), wantErr: errCrash},
		{name: "crash at block append", setup: logFault(recoverylog.KindBlockStored, 7, 0, true), mayLeaveNothing: true},
	}
}

// TestFailureRecovery is the seed's "failure recovery" test (SPARK-9217) on
// the memory source, with a crash injected at each point where the driver
// hands over to the log or the outputs. A first run is crashed; a second
// run of the same pipeline on the same log and stream then drains. Every
// batch that runs in both has the same time, blocks, ranges and records
// (G2); the only batches that run twice are those that started and did not
// complete (G3); every record is in exactly one completed batch (G1).
func TestFailureRecovery(t *testing.T) {
	for _, tc := range crashCases() {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testFailureRecovery(t, tc) })
		})
	}
}

func testFailureRecovery(t *testing.T, tc crashCase) {
	d := &durable{log: recoverylog.NewMemory(), out: t.TempDir()}

	// Run 1: produce, crash.
	rl1 := recoverycheck.NewRecorder()
	var p1 *stream.Pipeline
	h := tc.setup(d, func() { p1.Stop() })
	p1, src1 := pipeline(t, d, rl1, h)
	errc := make(chan error, 1)
	go func() { errc <- p1.Run(t.Context()) }()
	time.Sleep(300 * time.Millisecond)
	var err error
	if tc.produce != nil {
		err = tc.produce(d, src1, errc)
	} else {
		err = produceUntil(d, src1, 120, errc)
	}
	if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
		t.Fatalf("first Run = %v, want an error wrapping %v", err, tc.wantErr)
	}
	if tc.wantErr == nil && err != nil {
		t.Fatalf("first Run = %v, want nil after Stop", err)
	}
	d.log.SetAppendHook(nil)
	st1, err := recoverylog.Recover(d.log.Entries())
	if err != nil {
		t.Fatalf("Recover after the crash: %v", err)
	}
	if !tc.mayLeaveNothing && len(st1.Pending)+len(st1.Unallocated) == 0 {
		t.Fatalf("the crash left nothing to recover (state %+v): the test does not test", st1)
	}

	// Run 2: same pipeline, same log; a few more records, then drain.
	rl2 := recoverycheck.NewRecorder()
	p2, src2 := pipeline(t, d, rl2, hooks{})
	errc = make(chan error, 1)
	go func() { errc <- p2.Run(t.Context()) }()
	if tc.produce != nil {
		time.Sleep(12 * time.Second) // idle first
	}
	for range 5 {
		src2.produce(d.record(), d.record())
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	p2.Drain(context.Background())
	if err := <-errc; err != nil {
		t.Fatalf("second Run: %v", err)
	}
	d.check(t, st1, rl1, rl2)
}

// check reads the log after the second run and checks both runs with
// recoverycheck.Check.
func (d *durable) check(t *testing.T, st1 *recoverylog.State, rl1, rl2 *recoverycheck.Recorder) {
	t.Helper()
	st2, err := recoverylog.Recover(d.log.Entries())
	if err != nil {
		t.Fatal(err)
	}
	var produced []string
	for _, c := range d.calls {
		produced = append(produced, c...)
	}
	d.sink.Close()
	recoverycheck.Check(t, st1, st2, rl1, rl2, produced, d.out)
}
