package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/source"
)

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string // one line per problem
	}{
		{"negative BatchInterval", Config{BatchInterval: -time.Second},
			[]string{"BatchInterval -1s: must be > 0 (or 0 for the default, 1s)"}},
		{"sub-millisecond BatchInterval", Config{BatchInterval: 1500 * time.Microsecond},
			[]string{"BatchInterval 1.5ms: must be a whole number of milliseconds, such as 2ms"}},
		{"negative BlockInterval", Config{BlockInterval: -1},
			[]string{"BlockInterval -1ns: must be > 0 (or 0 for the default, 200ms)"}},
		{"BlockInterval in milliseconds by mistake", Config{BlockInterval: 200},
			[]string{"BlockInterval 200ns: must be at least 1ms (or 0 for the default, 200ms); write a duration in milliseconds as n * time.Millisecond"}},
		{"BlockInterval above BatchInterval", Config{BatchInterval: time.Second, BlockInterval: 2 * time.Second},
			[]string{"BlockInterval 2s: must be <= BatchInterval (1s)"}},
		{"BlockInterval above default BatchInterval", Config{BlockInterval: 3 * time.Second},
			[]string{"BlockInterval 3s: must be <= BatchInterval (1s)"}},
		{"MaxBufferedBytes below -1", Config{MaxBufferedBytes: -2},
			[]string{"MaxBufferedBytes -2: must be at least 1048576 (1 MiB), or -1 for no limit, or 0 for the default (64 MiB); write a size in MiB as n<<20"}},
		{"MaxBufferedBytes in MiB by mistake", Config{MaxBufferedBytes: 64},
			[]string{"MaxBufferedBytes 64: must be at least 1048576 (1 MiB), or -1 for no limit, or 0 for the default (64 MiB); write a size in MiB as n<<20"}},
		{"nil listener", Config{Listeners: []Listener{NopListener{}, nil}},
			[]string{"Listeners[1] nil: remove it or pass a Listener"}},
		{"negative CompactEvery", Config{CompactEvery: -1},
			[]string{"CompactEvery -1: must be >= 1 (or 0 for the default, 100)"}},
		{"negative DrainTimeout", Config{DrainTimeout: -time.Second},
			[]string{"DrainTimeout -1s: must be > 0 (or 0 for the default, 30s)"}},
		{"StateSnapshotInterval below BatchInterval", Config{BatchInterval: 2 * time.Second, StateSnapshotInterval: time.Second},
			[]string{"StateSnapshotInterval 1s: must be >= BatchInterval (2s), or 0 for the default (10 batch intervals)"}},
		{"negative StateSnapshotInterval", Config{StateSnapshotInterval: -time.Second},
			[]string{"StateSnapshotInterval -1s: must be >= BatchInterval (1s), or 0 for the default (10 batch intervals)"}},
		{"negative Parallelism", Config{Parallelism: -1},
			[]string{"Parallelism -1: must be >= 1 (or 0 for the default, GOMAXPROCS)"}},
		{"absurd Parallelism", Config{Parallelism: 1 << 40},
			[]string{"Parallelism 1099511627776: must be at most 10000 (or 0 for the default, GOMAXPROCS): it is the number of tasks run at once and of a keyed operator's hash partitions"}},
		{"nil Recovery pointer", Config{Recovery: (*recoverylog.MemoryStore)(nil)},
			[]string{"Recovery is a nil *recoverylog.MemoryStore: pass an Opener such as recovery.Dir(path), or nil for no log"}},
		{"nil Clock pointer", Config{Clock: (*clock.Manual)(nil)},
			[]string{"Clock is a nil *clock.Manual: pass a Clock, such as clock.NewManual(start), or nil for the wall clock"}},
		{"nil Stdout pointer", Config{Stdout: (*bytes.Buffer)(nil)},
			[]string{"Stdout is a nil *bytes.Buffer: pass an io.Writer, or nil for os.Stdout"}},
		{"nil listener pointer", Config{Listeners: []Listener{NopListener{}, (*NopListener)(nil)}},
			[]string{"Listeners[1] is a nil *stream.NopListener: remove it or pass a Listener"}},
		{"all problems together", Config{BatchInterval: -1, BlockInterval: -1, MaxBufferedBytes: 1000},
			[]string{
				"BatchInterval -1ns: must be > 0 (or 0 for the default, 1s)",
				"BlockInterval -1ns: must be > 0 (or 0 for the default, 200ms)",
				"MaxBufferedBytes 1000: must be at least 1048576 (1 MiB), or -1 for no limit, or 0 for the default (64 MiB); write a size in MiB as n<<20",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPipeline(tt.cfg)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("NewPipeline = %v, %v; want an error wrapping ErrInvalidConfig", p, err)
			}
			got := strings.Split(strings.TrimPrefix(err.Error(), ErrInvalidConfig.Error()+": "), "\n")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want [5]any // batch, block, bytes, unbatched, pending
	}{
		{"zero", Config{}, [5]any{time.Second, 200 * time.Millisecond, int64(64 << 20), 10, 10}},
		{"short batch interval caps block interval", Config{BatchInterval: 50 * time.Millisecond},
			[5]any{50 * time.Millisecond, 50 * time.Millisecond, int64(64 << 20), 10, 10}},
		{"many blocks per batch", Config{BatchInterval: 10 * time.Second},
			[5]any{10 * time.Second, 200 * time.Millisecond, int64(64 << 20), 100, 10}},
		{"no memory limit", Config{MaxBufferedBytes: -1},
			[5]any{time.Second, 200 * time.Millisecond, int64(-1), 10, 10}},
		{"set", Config{BatchInterval: 2 * time.Second, BlockInterval: time.Second, MaxBufferedBytes: 1 << 20, maxUnbatchedBlocks: 4, maxPendingBatches: 5},
			[5]any{2 * time.Second, time.Second, int64(1 << 20), 4, 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPipeline(tt.cfg)
			if err != nil {
				t.Fatalf("NewPipeline: %v", err)
			}
			c := p.cfg
			got := [5]any{c.BatchInterval, c.BlockInterval, c.MaxBufferedBytes, c.maxUnbatchedBlocks, c.maxPendingBatches}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("defaults (-want +got):\n%s", diff)
			}
			if c.Clock == nil || c.Logger == nil || c.Stdout == nil {
				t.Errorf("Clock, Logger or Stdout left nil: %+v", c)
			}
			if c.DrainTimeout != DefaultDrainTimeout && tt.cfg.DrainTimeout == 0 {
				t.Errorf("DrainTimeout %v, want the default %v", c.DrainTimeout, DefaultDrainTimeout)
			}
			if want := DefaultStateSnapshotBatches * c.BatchInterval; c.StateSnapshotInterval != want {
				t.Errorf("StateSnapshotInterval %v, want the default %v (10 batch intervals)", c.StateSnapshotInterval, want)
			}
			if want := runtime.GOMAXPROCS(0); tt.cfg.Parallelism == 0 && c.Parallelism != want {
				t.Errorf("Parallelism %d, want the default GOMAXPROCS %d", c.Parallelism, want)
			}
		})
	}
}

// TestGraphErrors checks the pipeline problems Run refuses to start with.
func TestGraphErrors(t *testing.T) {
	tests := []struct {
		name  string
		build func(p *Pipeline, s *Stream[string])
		want  []string
	}{
		{"no output", func(*Pipeline, *Stream[string]) {},
			[]string{"no output: add ForEach, ForEachBatch or Print to a stream before Run"}},
		{"window length not a multiple", func(_ *Pipeline, s *Stream[string]) {
			Print(Window(s, 1500*time.Millisecond, time.Second), 1)
		}, []string{"Window of From(source 0) (stream 0): length 1.5s: must be a positive multiple of the slide of From(source 0) (stream 0) (1s), such as 2s"}},
		{"window slide zero", func(_ *Pipeline, s *Stream[string]) {
			Print(Window(s, 2*time.Second, 0), 1)
		}, []string{"Window of From(source 0) (stream 0): slide 0s: must be a positive multiple of the slide of From(source 0) (stream 0) (1s), such as 1s"}},
		{"window of a window", func(_ *Pipeline, s *Stream[string]) {
			Print(Window(Window(s, 4*time.Second, 2*time.Second), 6*time.Second, 3*time.Second), 1)
		}, []string{"Window of Window (stream 1): slide 3s: must be a positive multiple of the slide of Window (stream 1) (2s), such as 4s"}},
		{"reduce window", func(_ *Pipeline, s *Stream[string]) {
			Print(ReduceByKeyAndWindow(CountByValue(s), nil, nil, -time.Second, time.Second), 1)
		}, []string{
			"ReduceByKeyAndWindow of CountByValue (stream 1): reduce is nil: pass a function",
			"ReduceByKeyAndWindow of CountByValue (stream 1): length -1s: must be a positive multiple of the slide of CountByValue (stream 1) (1s), such as 1s",
		}},
		{"state timeouts", func(_ *Pipeline, s *Stream[string]) {
			f := func(_ string, _ int64, _ *State[int]) (int, bool) { return 0, false }
			a, _ := MapWithState(CountByValue(s), f, StateTimeout(0))
			b, _ := MapWithState(CountByValue(s), f, StateTimeout(1500*time.Millisecond))
			Print(Union(a, b), 1)
		}, []string{
			"MapWithState of CountByValue (stream 1): StateTimeout 0s: must be a positive multiple of the batch interval (1s), such as 1s; leave StateTimeout out for no timeout",
			"MapWithState of CountByValue (stream 4): StateTimeout 1.5s: must be a positive multiple of the batch interval (1s), such as 2s; leave StateTimeout out for no timeout",
		}},
		{"nil state codec", func(_ *Pipeline, s *Stream[string]) {
			keep := func(_ string, _ []int64, st int64, _ bool) (int64, bool) { return st, true }
			Print(UpdateStateByKey(CountByValue(s), keep, StateCodec[int64](nil)), 1)
		}, []string{"UpdateStateByKey of CountByValue (stream 1): StateCodec[int64] is nil: pass a Codec, or leave the option out for GobCodec"}},
		{"nil dead letters pointer", func(_ *Pipeline, s *Stream[string]) {
			var box *letterBox
			Print(s, 1, Quarantine(box))
		}, []string{"Print of From(source 0) (stream 0): Quarantine(nil *stream.letterBox): pass the DeadLetters to send failing records to"}},
		{"nil functions", func(_ *Pipeline, s *Stream[string]) {
			ForEach(Filter(Map[string, int](s, nil), nil), nil)
		}, []string{
			"Map of From(source 0) (stream 0): f is nil: pass a function",
			"Filter of Map (stream 1): keep is nil: pass a function",
			"ForEach of Filter (stream 2): f is nil: pass a function",
		}},
		{"union of slides", func(_ *Pipeline, s *Stream[string]) {
			Print(Union(s, Window(s, 2*time.Second, 2*time.Second)), 1)
		}, []string{"Union of From(source 0) (stream 0): argument 1 (Window (stream 1)) has slide 2s, not 1s: union streams of the same slide"}},
		{"union of contexts", func(_ *Pipeline, s *Stream[string]) {
			other, _ := NewPipeline(Config{})
			Print(Union(s, From(other, newTestReceiver[string]())), 1)
		}, []string{"Union of From(source 0) (stream 0): argument 1 (From(source 0) (stream 0)) belongs to another Pipeline: build every stream from the same Pipeline"}},
		{"options of other operators", func(p *Pipeline, s *Stream[string]) {
			keep := func(_ string, _ []int64, st int64, _ bool) (int64, bool) { return st, true }
			counts := UpdateStateByKey(CountByValue(s), keep, StateTimeout(time.Minute), Named("counts"))
			Print(Union(counts, Window(counts, time.Second, time.Second, Retry(3))), 1, PartitionedByKey(), StateCodec(GobCodec[int]()))
			ForEach(From(p, newTestReceiver[Pair[string, int64]](), Retry(3), Quarantine(nil), Origins()),
				func(context.Context, Pair[string, int64]) error { return nil }, StateTimeout(time.Second))
		}, []string{
			"UpdateStateByKey of CountByValue (stream 1): Named is an option of From and the outputs only: remove it",
			"UpdateStateByKey of CountByValue (stream 1): StateTimeout is an option of MapWithState only: remove it",
			"Window of UpdateStateByKey (stream 2): Retry is an option of the outputs (ForEach, ForEachPartition, ForEachBatch, Print) only: remove it",
			"Print of Union (stream 4): StateCodec is an option of the stateful operators (UpdateStateByKey, MapWithState, Window, ReduceByKeyAndWindow) only: remove it",
			"Print of Union (stream 4): PartitionedByKey is an option of From and MapWithState only: remove it",
			"From(source 1): Retry is an option of the outputs (ForEach, ForEachPartition, ForEachBatch, Print) only: remove it",
			"From(source 1): Quarantine is an option of the outputs (ForEach, ForEachPartition, ForEachBatch, Print), the keyed, window and state operators (ReduceByKey, CountByValue, Window, ReduceByKeyAndWindow, UpdateStateByKey, MapWithState) and Transform only: remove it",
			"From(source 1): Origins is an option of ForEachBatch only: remove it",
			"ForEach of From(source 1) (stream 5): StateTimeout is an option of MapWithState only: remove it",
		}},
		{"options of keyed operators", func(_ *Pipeline, s *Stream[string]) {
			var dead *letterBox
			plus := func(a, b int64) int64 { return a + b }
			counts := ReduceByKey(CountByValue(s, StateCodec(GobCodec[string]())), plus, Quarantine(dead))
			Print(Window(counts, time.Second, time.Second, Quarantine(nil)), 1, PartitionedByKey())
		}, []string{
			"CountByValue of From(source 0) (stream 0): StateCodec is an option of the stateful operators (UpdateStateByKey, MapWithState, Window, ReduceByKeyAndWindow) only: remove it",
			"ReduceByKey of CountByValue (stream 1): Quarantine(nil): pass the DeadLetters to send failing records to",
			"Window of ReduceByKey (stream 2): Quarantine(nil): pass the DeadLetters to send failing records to",
			"Print of Window (stream 3): PartitionedByKey is an option of From and MapWithState only: remove it",
		}},
		{"nil receiver", func(p *Pipeline, s *Stream[string]) {
			Print(Union(s, From[string](p, nil)), 1)
		}, []string{"From: source 1: receiver is nil: pass a source.Receiver"}},
		{"nil pointer receiver", func(p *Pipeline, s *Stream[string]) {
			var r *testReceiver[string]
			Print(Union(s, From(p, r)), 1)
		}, []string{"From: source 1: receiver is nil: pass a source.Receiver"}},
		{"nil pointer receiver sharing shards", func(p *Pipeline, s *Stream[string]) {
			// A receiver whose methods dereference it, as the Kinesis
			// receiver's do: asked whether it shares its shards, a nil
			// one panicked in Run.
			var r *sharingReceiver
			Print(UpdateStateByKey(Map(From(p, r), func(v string) Pair[string, int] { return Pair[string, int]{v, 1} }),
				func(_ string, vs []int, n int, _ bool) (int, bool) { return n + len(vs), true }), 1)
		}, []string{"From: source 1: receiver is nil: pass a source.Receiver"}},
		{"one receiver given to two Froms", func(p *Pipeline, s *Stream[string]) {
			r := newTestReceiver[string]()
			Print(Union(s, From(p, r), From(p, r)), 1)
		}, []string{"From: source 2: its receiver is source 1's too: a receiver is started once, by one From; " +
			"use the stream source 1's From returned (several operators may read one stream), or give this From a receiver of its own"}},
		{"nil union argument", func(_ *Pipeline, s *Stream[string]) {
			Print(Union(s, s, nil), 1)
		}, []string{"Union of From(source 0) (stream 0): argument 2 is nil: pass a stream made from the same Pipeline"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _, s := newTest[string](t, Config{})
			tt.build(p, s)
			err := p.Validate()
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate = %v, want an error wrapping ErrInvalidConfig", err)
			}
			if runErr := p.Run(t.Context()); runErr == nil || runErr.Error() != err.Error() {
				t.Errorf("Run = %v, want %v", runErr, err)
			}
			got := strings.Split(strings.TrimPrefix(err.Error(), ErrInvalidConfig.Error()+": "), "\n")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNilStreamPanics checks that a nil *Stream or *Pipeline, which leaves
// no Pipeline to record a graph error on, panics at the call that passed it,
// naming the operator, the argument and the fix.
func TestNilStreamPanics(t *testing.T) {
	var s *Stream[string]
	var kvs *Stream[Pair[string, int]]
	noop := func(context.Context, string) error { return nil }
	sum := func(a, b int) int { return a + b }
	tests := []struct {
		op   string
		call func()
	}{
		{"Map", func() { Map(s, strings.ToUpper) }},
		{"Filter", func() { Filter(s, func(string) bool { return true }) }},
		{"FlatMap", func() { FlatMap(s, func(v string) []string { return []string{v} }) }},
		{"MapBatch", func() { MapBatch(s, func(v []string) []string { return v }) }},
		{"Transform", func() {
			Transform(s, func(_ context.Context, b *batch.Batch[string]) (*batch.Batch[string], error) { return b, nil })
		}},
		{"Union", func() { Union(s) }},
		{"ForEach", func() { ForEach(s, noop) }},
		{"ForEachPartition", func() { ForEachPartition(s, func(context.Context, Partition[string]) error { return nil }) }},
		{"ForEachBatch", func() { ForEachBatch(s, func(context.Context, *batch.Batch[string]) error { return nil }) }},
		{"Print", func() { Print(s, 1) }},
		{"ReduceByKey", func() { ReduceByKey(kvs, sum) }},
		{"CountByValue", func() { CountByValue(s) }},
		{"PartitionedBy", func() { PartitionedBy(kvs, strings.ToLower) }},
		{"UpdateStateByKey", func() {
			UpdateStateByKey(kvs, func(_ string, _ []int, st int, _ bool) (int, bool) { return st, true })
		}},
		{"Window", func() { Window(s, time.Second, time.Second) }},
		{"ReduceByKeyAndWindow", func() { ReduceByKeyAndWindow(kvs, sum, nil, time.Second, time.Second) }},
		{"MapWithState", func() {
			MapWithState(kvs, func(_ string, v int, _ *State[int]) (int, bool) { return v, true })
		}},
	}
	for _, tt := range tests {
		t.Run(tt.op, func(t *testing.T) {
			want := "stream: " + tt.op + ": s is nil: pass a stream made from a Pipeline (by From or an operator)"
			if got := recoverString(tt.call); got != want {
				t.Errorf("panic %q, want %q", got, want)
			}
		})
	}
	t.Run("From", func(t *testing.T) {
		want := "stream: From: p is nil: pass a Pipeline made by NewPipeline"
		if got := recoverString(func() { From[string](nil, newTestReceiver[string]()) }); got != want {
			t.Errorf("panic %q, want %q", got, want)
		}
	})
}

// recoverString calls f and returns what it panicked with, as a string.
func recoverString(f func()) (msg string) {
	msg = "no panic"
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return msg
}

// TestLoggerDefaultsToSlogDefault checks that a Pipeline without a Logger
// logs to slog.Default(), so that stalls and failures are seen without
// configuration, and that its receivers get the same logger.
func TestLoggerDefaultsToSlogDefault(t *testing.T) {
	p, err := NewPipeline(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if p.cfg.Logger != slog.Default() {
		t.Errorf("Logger defaults to %v, want slog.Default()", p.cfg.Logger)
	}
	if rt := (source.Runtime[int]{}).WithDefaults(); rt.Logger != slog.Default() {
		t.Errorf("source.Runtime's Logger defaults to %v, want slog.Default()", rt.Logger)
	}
}

// sharingReceiver is a receiver whose shards other workers share, like the
// Kinesis receiver with leases.
type sharingReceiver struct {
	*testReceiver[string]
	shares bool
}

// SharesShards implements source.ShardSharer.
func (r *sharingReceiver) SharesShards() bool { return r.shares }
