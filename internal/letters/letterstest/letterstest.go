// Package letterstest runs the pipelines the tests of the dead-letter
// stores share.
package letterstest

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/source"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// RunOneInN runs a pipeline over n records ("0", "1", ...) on 4 shards
// whose Map panics on every record divisible by every, quarantining into
// d, and returns the records that panicked. It fails tb if Run fails or if
// any other record is not output exactly once.
func RunOneInN(tb testing.TB, d stream.DeadLetters, n, every int) []string {
	tb.Helper()
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	src, err := memory.New[string](memory.Config{Shards: 4})
	if err != nil {
		tb.Fatal(err)
	}
	var bad []string
	for i := range n {
		if err := src.Push(strconv.Itoa(i)); err != nil {
			tb.Fatal(err)
		}
		if i%every == 0 {
			bad = append(bad, strconv.Itoa(i))
		}
	}
	nums := stream.Map(stream.From(p, src), func(s string) int {
		i, _ := strconv.Atoi(s)
		if i%every == 0 {
			panic("kaboom " + s)
		}
		return i
	})
	var out atomic.Int64
	stream.ForEach(nums, func(context.Context, int) error { out.Add(1); return nil },
		stream.Retry(0), stream.Quarantine(d), stream.Named("out"))
	ctx, cancel := context.WithCancel(tb.Context())
	cancel() // Run drains at once: what was pushed is processed
	if err := p.Run(ctx); err != nil {
		tb.Fatalf("Run = %v, want nil: the bad records quarantined", err)
	}
	if got, want := out.Load(), int64(n-len(bad)); got != want {
		tb.Errorf("%d records output, want %d", got, want)
	}
	return bad
}

// Check fails tb unless letters are those of the records bad, each with
// its panic and stack, and a source range and offset that name it.
func Check(tb testing.TB, letters []stream.DeadLetter, bad []string) {
	tb.Helper()
	want := map[string]bool{}
	for _, b := range bad {
		want[b] = true
	}
	for _, l := range letters {
		r := string(l.Record)
		if !want[r] {
			tb.Errorf("letter %d-%d-%d of record %q: not a bad record, or twice", l.Time, l.Output, l.Index, r)
			continue
		}
		delete(want, r)
		if l.Encoding != "raw" || l.Panic != "kaboom "+r || l.Err != "panic: kaboom "+r || !strings.Contains(l.Stack, "letterstest.RunOneInN") {
			tb.Errorf("letter of %q: encoding %q panic %q err %q, stack:\n%s\nwant raw, the panic and the stack of the function", r, l.Encoding, l.Panic, l.Err, l.Stack)
		}
		if l.Range.Shard == "" || l.Range.First == "" || l.OutputName == "" {
			tb.Errorf("letter of %q: range %+v output %q: want the source range and the output's name", r, l.Range, l.OutputName)
		}
	}
	if len(want) > 0 {
		tb.Errorf("%d bad records not quarantined: %v", len(want), want)
	}
}

// sharing is a memory source that says, as a Kinesis receiver with leases
// does, that other workers share its shards.
type sharing struct{ *memory.Source[string] }

func (sharing) SharesShards() bool { return true }

// OnFleet calls f once with the context of an output of a pipeline with a
// recovery log whose source shares its shards with other workers
// (stream.SharesShards is true there), as the stores' Quarantine is called
// on a fleet, and fails tb if f or Run fails.
func OnFleet(tb testing.TB, f func(ctx context.Context) error) {
	tb.Helper()
	onPipeline(tb, recovery.Dir(tb.TempDir()), true, f)
}

// OnPipeline calls f once with the context of an output of a pipeline on
// one worker, with the recovery log rec (none if nil), as the stores'
// Quarantine is called there, and fails tb if f or Run fails.
func OnPipeline(tb testing.TB, rec recovery.Opener, f func(ctx context.Context) error) {
	tb.Helper()
	onPipeline(tb, rec, false, f)
}

// onPipeline calls f once with the context of an output of a pipeline with
// the recovery log rec (none if nil), whose source shares its shards if
// fleet is set, and fails tb if f or Run fails.
func onPipeline(tb testing.TB, rec recovery.Opener, fleet bool, f func(ctx context.Context) error) {
	tb.Helper()
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler), Recovery: rec})
	if err != nil {
		tb.Fatal(err)
	}
	src, err := memory.New[string](memory.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	if err := src.Push("x"); err != nil {
		tb.Fatal(err)
	}
	var from source.Receiver[string] = src
	if fleet {
		from = sharing{src}
	}
	calls := 0
	stream.ForEach(stream.From(p, from), func(ctx context.Context, _ string) error {
		calls++
		if err := f(ctx); err != nil {
			return err
		}
		return p.Drain(ctx) // the one record is processed
	}, stream.Retry(0))
	ctx, cancel := context.WithTimeout(tb.Context(), time.Minute)
	defer cancel()
	if err := p.Run(ctx); err != nil {
		tb.Fatalf("Run = %v, want nil", err)
	}
	if calls != 1 {
		tb.Fatalf("f called %d times, want once", calls)
	}
}
