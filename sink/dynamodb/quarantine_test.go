package dynamodb_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/sink/dynamodb"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// letterBox keeps the letters a pipeline quarantines.
type letterBox struct {
	mu      sync.Mutex
	letters []stream.DeadLetter
}

func (b *letterBox) Quarantine(_ context.Context, letters []stream.DeadLetter) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.letters = append(b.letters, letters...)
	return nil
}

// TestQuarantineWithOrigins runs, against kinesalite and dynalite, a
// leased worker whose Map panics on one record before the sink, written
// with stream.Origins and stream.Quarantine: the record is quarantined
// and every other one written once, with versions of origin. A second
// application reading the stream again from its start (a replay) then
// applies nothing: each write's version is the one the first run gave it,
// the failing record's absence shifting no other record's.
func TestQuarantineWithOrigins(t *testing.T) {
	t.Parallel()
	c, table, _ := setup(t)
	env, in := oneShardStream(t)
	const bad = 17
	recs := events(60, 5, true)
	putEvents(t, env, in, recs)
	run := func(app string) (dynamodb.Stats, []stream.DeadLetter) {
		awsCfg := env.AWSConfig()
		recv, err := kinesis.New(kinesis.Config{Stream: in, App: app, InitialPosition: kinesis.TrimHorizon,
			AWS: &awsCfg, Endpoint: env.KinesisEndpoint, PollInterval: 10 * time.Millisecond,
			Leases: &leasetable.Config{Endpoint: env.DynamoDBEndpoint, WorkerID: "w", StateDir: t.TempDir()}})
		if err != nil {
			t.Fatal(err)
		}
		p, err := stream.NewPipeline(stream.Config{BatchInterval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		s := newSink(t, t.Context(), dynamodb.Config{Client: c, Table: table})
		parsed := stream.Map(stream.From(p, recv), func(r kinesis.Record) event {
			e := parseEvent(r)
			if e.N == bad {
				panic("bad record")
			}
			return e
		})
		box := &letterBox{}
		seen := 0
		stream.ForEachBatch(parsed, func(ctx context.Context, b *batch.Batch[event]) error {
			if err := s.Write(ctx, b); err != nil {
				return err
			}
			if seen += b.Len(); seen == len(recs)-1 {
				return p.Drain(ctx)
			}
			return nil
		}, stream.Origins(), stream.Quarantine(box), stream.Retry(0))
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := p.Run(ctx); err != nil {
			t.Fatalf("%s: Run = %v, want nil: the bad record quarantined", app, err)
		}
		return s.Stats(), box.letters
	}
	st, letters := run(in)
	if st.Written != int64(len(recs)-1) {
		t.Errorf("first run: Stats %+v, want %d written", st, len(recs)-1)
	}
	if len(letters) != 1 || letters[0].Panic != "bad record" || letters[0].Range.Shard == "" {
		t.Errorf("letters %+v, want the bad record's, with its shard", letters)
	}
	want := apply(nil, append(recs[:bad:bad], recs[bad+1:]...)...)
	if diff := cmp.Diff(want, scan(t, c, table)); diff != "" {
		t.Errorf("table after the first run (-want +got):\n%s", diff)
	}
	if st, _ := run(in + "-replay"); st.Written != 0 || st.Skipped != int64(len(recs)-1) {
		t.Errorf("replay: Stats %+v, want every write skipped as applied", st)
	}
	if diff := cmp.Diff(want, scan(t, c, table)); diff != "" {
		t.Errorf("table after the replay (-want +got):\n%s", diff)
	}
}
