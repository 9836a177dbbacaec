package kinesisrecovery_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/sink/files"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/stream/internal/recoverycheck"
)

// waitLimit bounds every wait of the test, so a bug fails it instead of
// hanging it; nothing is asserted about time.
const waitLimit = 2 * time.Minute

// fixture is what outlives a crash: the stream, the log and the output.
type fixture struct {
	env    *localaws.Env
	stream string
	logDir string
	out    string
	sink   *files.Sink[string] // the last run's: a restart closes it, as the crash of its process would

	mu       sync.Mutex
	produced []string
}

// put puts n new records on the stream, each its own partition key so
// they spread over the shards.
func (f *fixture) put(ctx context.Context, n int) error {
	f.mu.Lock()
	base := len(f.produced)
	data := make([][]byte, n)
	for i := range data {
		r := "rec-" + strconv.Itoa(base+i)
		data[i] = []byte(r)
		f.produced = append(f.produced, r)
	}
	f.mu.Unlock()
	return f.env.PutRecords(ctx, f.stream, data, func(i int) string { return strconv.Itoa(base + i) })
}

// pipeline builds the test pipeline: the Kinesis receiver (which starts
// each shard after the greatest sequence number the recovery log holds for
// it, as the driver tells it), mapped to strings, with a "collect" output
// (rl records it, then out is called) and the files sink.
func (f *fixture) pipeline(t *testing.T, rl *recoverycheck.Recorder,
	out func(ctx context.Context, b *batch.Batch[string]) error) *stream.Pipeline {
	t.Helper()
	awsCfg := f.env.AWSConfig()
	recv, err := kinesis.New(kinesis.Config{
		Stream:          f.stream,
		App:             "recovery-test",
		InitialPosition: kinesis.TrimHorizon,
		AWS:             &awsCfg,
		Endpoint:        f.env.KinesisEndpoint,
		PollInterval:    10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := stream.NewPipeline(stream.Config{
		BatchInterval: 200 * time.Millisecond,
		BlockInterval: 50 * time.Millisecond,
		Recovery:      recovery.Dir(f.logDir),
		CompactEvery:  5,
		Listeners:     []stream.Listener{rl},
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := stream.Map(stream.From(p, recv, stream.Named(f.stream)), func(r kinesis.Record) string { return string(r.Data) })
	stream.ForEachBatch(lines, func(ctx context.Context, b *batch.Batch[string]) error {
		rl.See(b)
		return out(ctx, b)
	}, stream.Named("collect"))
	if f.sink != nil {
		f.sink.Close()
	}
	sink, err := files.New(files.Config[string]{Dir: f.out})
	if err != nil {
		t.Fatal(err)
	}
	f.sink = sink
	stream.ForEachBatch(lines, sink.Write, stream.Named("files"))
	return p
}

func (f *fixture) state(t *testing.T) *recoverylog.State {
	t.Helper()
	l, err := recoverylog.Open(t.Context(), recovery.Dir(f.logDir), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	st, err := recoverylog.Load(t.Context(), l)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestFailureRecovery runs a word-free pipeline on kinesalite, crashes it
// inside an output of its fourth batch with data while records keep
// arriving, restarts it on the same directory log and checks that every
// recomputed batch has the same time, ranges and records, that only the
// interrupted batches ran twice, that every record is in exactly one
// completed batch and that the files sink wrote each batch once.
func TestFailureRecovery(t *testing.T) {
	env := localaws.ForTest(t, localaws.Options{Kinesis: true})
	ctx, cancelAll := context.WithTimeout(t.Context(), waitLimit)
	defer cancelAll()
	f := &fixture{env: env, stream: localaws.UniqueName(t), logDir: t.TempDir(), out: t.TempDir()}
	if err := env.CreateStream(ctx, f.stream, 2); err != nil {
		t.Fatal(err)
	}

	// Run 1: records arrive every 20ms; the fourth batch with data
	// crashes the pipeline from inside its first output: it stops now
	// (Stop), and the output fails as its ctx is done.
	rl1 := recoverycheck.NewRecorder()
	withData := 0
	var p1 *stream.Pipeline
	p1 = f.pipeline(t, rl1, func(ctx context.Context, b *batch.Batch[string]) error {
		if b.Len() > 0 {
			if withData++; withData == 4 {
				p1.Stop()
				return ctx.Err()
			}
		}
		return nil
	})
	errc := make(chan error, 1)
	go func() { errc <- p1.Run(ctx) }()
	if err := produceUntil(ctx, f, errc); err != nil {
		t.Fatalf("first Run: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the first run never reached its fourth batch with data")
	}
	st1 := f.state(t)

	// Run 2: the same pipeline on the same log, which reads each shard
	// after its logged position by itself; more records arrive; drain once every record
	// not in a completed batch of run 1 was seen.
	if err := f.put(ctx, 40); err != nil {
		t.Fatal(err)
	}
	need := f.needed(rl1, st1)
	rl2 := recoverycheck.NewRecorder()
	seenAll := make(chan struct{})
	var seen sync.Map
	var closeOnce sync.Once
	p2 := f.pipeline(t, rl2, func(_ context.Context, b *batch.Batch[string]) error {
		for r := range b.All() {
			seen.Store(r, true)
		}
		if covered(&seen, need) {
			closeOnce.Do(func() { close(seenAll) })
		}
		return nil
	})
	errc = make(chan error, 1)
	go func() { errc <- p2.Run(ctx) }()
	select {
	case <-seenAll:
	case err := <-errc:
		t.Fatalf("second Run returned early: %v", err)
	case <-ctx.Done():
		t.Fatal("the second run did not see every record in time")
	}
	p2.Drain(context.Background())
	if err := <-errc; err != nil {
		t.Fatalf("second Run: %v", err)
	}
	f.sink.Close()
	recoverycheck.Check(t, st1, f.state(t), rl1, rl2, f.produced, f.out)
}

// produceUntil puts 10 records every 20ms until Run returns, and returns
// its error.
func produceUntil(ctx context.Context, f *fixture, errc <-chan error) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := f.put(ctx, 10); err != nil && ctx.Err() == nil {
			return err
		}
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// needed returns the records produced that no batch of run 1 completed.
func (f *fixture) needed(rl1 *recoverycheck.Recorder, st1 *recoverylog.State) []string {
	done := map[string]bool{}
	pending := map[batch.Time]bool{}
	for _, p := range st1.Pending {
		pending[p.Time] = true
	}
	for tm, s := range rl1.Saw() {
		if !pending[tm] {
			for _, r := range s.Records {
				done[r] = true
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var need []string
	for _, r := range f.produced {
		if !done[r] {
			need = append(need, r)
		}
	}
	return need
}

func covered(seen *sync.Map, need []string) bool {
	for _, r := range need {
		if _, ok := seen.Load(r); !ok {
			return false
		}
	}
	return true
}
