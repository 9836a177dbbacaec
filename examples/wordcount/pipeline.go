package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/sink/files"
	"github.com/weirstream/weir/stream"
)

// newPipeline returns the example's Pipeline: batches every o.batch, and a
// recovery log in o.state so that a restarted run recomputes the batches a
// crash interrupted; listeners are told about its batches.
func newPipeline(o options, logger *slog.Logger, listeners ...stream.Listener) (*stream.Pipeline, error) {
	return stream.NewPipeline(stream.Config{BatchInterval: o.batch, Logger: logger, Recovery: recovery.Dir(o.state), Listeners: listeners})
}

// countWords adds the word count to lines: words are counted per batch, each
// batch's counts written to a file of its own in o.out (exactly once, even
// across crashes), and each batch printed with its top words and the
// running total of words. It returns the number of lines counted so far,
// safe to read at any time.
func countWords(lines *stream.Stream[string], o options, out io.Writer) (*atomic.Int64, error) {
	sink, err := files.New(files.Config[stream.Pair[string, int64]]{Dir: o.out, Prefix: "counts-", Encode: encodeCounts})
	if err != nil {
		return nil, err
	}
	var counted atomic.Int64
	words := stream.FlatMap(lines, strings.Fields)
	counts := stream.CountByValue(words)
	stream.ForEachBatch(counts, sink.Write, stream.Named("files"))
	top := o.top
	var total int64 // only touched by the output, which runs one batch at a time
	stream.ForEachBatch(counts, func(_ context.Context, b *batch.Batch[stream.Pair[string, int64]]) error {
		pairs := b.Records()
		var n int64
		for _, p := range pairs {
			n += p.Value
		}
		total += n
		slices.SortFunc(pairs, func(x, y stream.Pair[string, int64]) int {
			return cmp.Or(cmp.Compare(y.Value, x.Value), cmp.Compare(x.Key, y.Key))
		})
		var tops []string
		for _, p := range pairs[:min(top, len(pairs))] {
			tops = append(tops, fmt.Sprintf("%s=%d", p.Key, p.Value))
		}
		records := 0
		for _, r := range b.Ranges() {
			records += r.Count
		}
		counted.Add(int64(records))
		_, err := fmt.Fprintf(out, "batch %s  lines %d  words %d  top [%s]  total words %d\n",
			b.Time().Std().Format("15:04:05.000"), records, n, strings.Join(tops, " "), total)
		return err
	}, stream.Named("print"))
	return &counted, nil
}

// encodeCounts writes a batch's counts as "word count" lines sorted by
// word, so that a batch's file does not depend on map order.
func encodeCounts(w io.Writer, b *batch.Batch[stream.Pair[string, int64]]) error {
	pairs := b.Records()
	slices.SortFunc(pairs, func(x, y stream.Pair[string, int64]) int { return cmp.Compare(x.Key, y.Key) })
	for _, p := range pairs {
		if _, err := fmt.Fprintf(w, "%s %d\n", p.Key, p.Value); err != nil {
			return err
		}
	}
	return nil
}

// withDuration returns ctx, done after d too if d > 0 (-duration).
func withDuration(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return context.WithCancel(ctx)
}

// awaitCounted waits until counted reaches want, ctx is done or wait has
// passed, whichever is first; it reports whether counted reached want.
func awaitCounted(ctx context.Context, counted *atomic.Int64, want int64, wait time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for counted.Load() < want {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return true
}

// vocabulary is what the text generator draws words from.
var vocabulary = strings.Fields(`the quick brown fox jumps over the lazy dog while a stream
of records flows through shards and blocks into batches that count every word exactly once`)

// lineGen produces pseudo-random lines of text; it is deterministic for a seed.
type lineGen struct{ r *rand.Rand }

func newLineGen(seed uint64) *lineGen { return &lineGen{r: rand.New(rand.NewPCG(seed, 1))} }

// next returns a line of 3 to 12 words.
func (g *lineGen) next() string {
	n := 3 + g.r.IntN(10)
	w := make([]string, n)
	for i := range w {
		w[i] = vocabulary[g.r.IntN(len(vocabulary))]
	}
	return strings.Join(w, " ")
}

// produce calls send with rate/10 generated lines ten times a second until ctx
// is done or send fails; it returns the number of lines sent.
func produce(ctx context.Context, rate int, send func(context.Context, []string) error) (int, error) {
	g := newLineGen(uint64(time.Now().UnixNano()))
	per := max(1, rate/10)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	sent := 0
	for {
		lines := make([]string, per)
		for i := range lines {
			lines[i] = g.next()
		}
		// Stopping must not cancel a send in flight: a put whose reply is
		// cut off may still have been stored, and then sent would miss
		// lines the pipeline counts. So ctx is only looked at between sends.
		sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err := send(sendCtx, lines)
		cancel()
		if err != nil {
			return sent, err
		}
		sent += per
		select {
		case <-ctx.Done():
			return sent, nil
		case <-tick.C:
		}
	}
}
