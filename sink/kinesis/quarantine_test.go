package kinesis_test

import (
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/internal/letters/letterstest"
	"github.com/weirstream/weir/sink/kinesis"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// TestQuarantineInvalidRecords runs a pipeline whose output writes with a
// Sink, with stream.Quarantine, a batch of ten records two of which
// Kinesis would refuse (an empty partition key, one of 300 characters).
// Write failed the batch as a whole, so the pass quarantined all ten
// records, each letter naming the first bad record's problem, and wrote
// none of the eight good ones. Now the two bad records are quarantined,
// each with its own problem, and the eight others are written once.
func TestQuarantineInvalidRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(t, nil)
		s, err := kinesis.New(kinesis.Config[rec]{Client: f, Stream: "out", Record: recordOf, Origin: "app/out"})
		if err != nil {
			t.Fatal(err)
		}
		p, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		src, err := memory.New[rec](memory.Config{})
		if err != nil {
			t.Fatal(err)
		}
		var in, want []rec
		for i := range 10 {
			r := rec{Key: "k", I: i}
			switch i {
			case 3:
				r.Key = ""
			case 6:
				r.Key = strings.Repeat("x", 300)
			default:
				want = append(want, r)
			}
			in = append(in, r)
		}
		if err := src.Push(in...); err != nil {
			t.Fatal(err)
		}
		box := &letterstest.Box{}
		stream.ForEachBatch(stream.From(p, src), s.Write, stream.Quarantine(box))
		if err := p.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := p.Run(t.Context()); err != nil {
			t.Fatalf("Run = %v, want nil: the invalid records quarantined", err)
		}
		if len(box.Letters()) != 2 {
			t.Fatalf("%d letters, want 2 (the invalid records'):\n%v", len(box.Letters()), box.Letters())
		}
		for i, problem := range []string{"empty", "300 characters"} {
			l := box.Letters()[i]
			if !strings.Contains(l.Err, "partition key") || !strings.Contains(l.Err, problem) {
				t.Errorf("letter %d: error %q, want one naming the partition key's problem (%s)", i, l.Err, problem)
			}
		}
		checkOnceInOrder(t, want, f.written)
	})
}
