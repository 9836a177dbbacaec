package kinesis_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/source/kinesis/kinesistest"
	"github.com/weirstream/weir/stream"
)

// TestMaxRecordsPerSecond checks, in virtual time on the fake, that a
// shard is read no faster than its static cap, and every record still
// arrives.
func TestMaxRecordsPerSecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, perSecond = 2000, 200.0
		fake := kinesistest.New()
		if err := fake.CreateStream("s", 2); err != nil {
			t.Fatal(err)
		}
		want := putSized(t, fake, "s", n, 10)
		r, err := kinesis.New(kinesis.Config{
			Stream: "s", App: "a", Client: fake, InitialPosition: kinesis.TrimHorizon, MaxRecordsPerSecond: perSecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var at5s int
		var mu sync.Mutex
		got := runPipeline(t, r, n, 0, func(b *batch.Batch[kinesis.Record]) {
			mu.Lock()
			defer mu.Unlock()
			if time.Since(start) <= 5*time.Second {
				at5s += b.Len()
			}
		}, nil)
		// Two shards at 200/s each, a second's worth at the start: at
		// most 2*(200 + 5*200) records in the first 5s.
		if limit := int(2 * 6 * perSecond); at5s > limit || at5s < limit/2 {
			t.Errorf("%d records output in the first 5s, want about 2 shards x 200/s (at most %d)", at5s, limit)
		}
		if took := time.Since(start); took < 4*time.Second {
			t.Errorf("read %d records in %v, want at least 4s at 400/s", n, took)
		}
		checkOnceInOrder(t, want, got)
	})
}

// delays records the scheduling delay of every batch started after a
// time.
type delays struct {
	stream.NopListener
	from time.Time

	mu  sync.Mutex
	max time.Duration
	all []time.Duration
}

func (d *delays) BatchStarted(info stream.BatchInfo) {
	if info.Time.Std().Before(d.from) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.max = max(d.max, info.SchedulingDelay)
	d.all = append(d.all, info.SchedulingDelay)
}

func (d *delays) worst() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.max
}

// runPipeline runs r in a pipeline of 100ms batches whose output calls
// each (if not nil) and then takes perRecord for each record, until n
// records were output, and returns them. l, if not nil, listens.
func runPipeline(t *testing.T, r *kinesis.Receiver, n int, perRecord time.Duration, each func(*batch.Batch[kinesis.Record]), l stream.Listener) []kinesis.Record {
	t.Helper()
	return runPipelineIn(t, stream.Config{}, r, n, perRecord, each, l)
}

// runPipelineIn is runPipeline with the other settings of cfg (its
// memory budget).
func runPipelineIn(t *testing.T, cfg stream.Config, r *kinesis.Receiver, n int, perRecord time.Duration, each func(*batch.Batch[kinesis.Record]), l stream.Listener) []kinesis.Record {
	t.Helper()
	cfg.BatchInterval, cfg.BlockInterval = 100*time.Millisecond, 20*time.Millisecond
	if l != nil {
		cfg.Listeners = []stream.Listener{l}
	}
	sc, err := stream.NewPipeline(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got []kinesis.Record // touched by the output only, one batch at a time
	all := make(chan struct{})
	stream.ForEachBatch(stream.From(sc, r), func(_ context.Context, b *batch.Batch[kinesis.Record]) error {
		if each != nil {
			each(b)
		}
		time.Sleep(time.Duration(b.Len()) * perRecord)
		before := len(got)
		for rec := range b.All() {
			got = append(got, rec)
		}
		if before < n && len(got) >= n {
			close(all)
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- sc.Run(t.Context()) }()
	select {
	case <-all:
		sc.Drain(context.Background())
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	case err := <-done:
		t.Fatalf("pipeline stopped after %d of %d records: %v", len(got), n, err)
	}
	return got
}

// TestBackpressureBoundsDelay runs, in virtual time on the fake, a
// pipeline whose output processes 1000 records/s against a backlog it
// takes 20s to work off. Without backpressure the first batches take the
// backlog in (as much as the byte budget holds) and the batches after them
// start seconds late; with it, the read rate follows the processing rate
// from the first batch on, and after the first second the batches start
// on time (their scheduling delay stays within two batch intervals) while
// the backlog waits in Kinesis.
func TestBackpressureBoundsDelay(t *testing.T) {
	const n, perRecord = 20000, time.Millisecond
	for _, tt := range []struct {
		name         string
		backpressure bool
		check        func(t *testing.T, worst time.Duration)
	}{
		{"without backpressure", false, func(t *testing.T, worst time.Duration) {
			if worst < 2*time.Second {
				t.Errorf("worst scheduling delay after 1s %v, want seconds: the test must show the problem it solves", worst)
			}
		}},
		{"with backpressure", true, func(t *testing.T, worst time.Duration) {
			if worst > 200*time.Millisecond {
				t.Errorf("worst scheduling delay after 1s %v, want at most 2 batch intervals (200ms)", worst)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := kinesistest.New()
				if err := fake.CreateStream("s", 4); err != nil {
					t.Fatal(err)
				}
				want := putSized(t, fake, "s", n, 100)
				r, err := kinesis.New(kinesis.Config{
					Stream: "s", App: "a", Client: fake, InitialPosition: kinesis.TrimHorizon, Backpressure: tt.backpressure,
				})
				if err != nil {
					t.Fatal(err)
				}
				d := &delays{from: time.Now().Add(time.Second)}
				got := runPipeline(t, r, n, perRecord, nil, d)
				t.Logf("worst scheduling delay after 1s: %v; read rate at the end %.0f records/s", d.worst(), kinesis.ReadRate(r))
				tt.check(t, d.worst())
				if tt.backpressure {
					if rate := kinesis.ReadRate(r); rate < 700 || rate > 1100 {
						t.Errorf("read rate %v at the end, want about the processing rate, 1000/s", rate)
					}
				}
				checkOnceInOrder(t, want, got)
			})
		})
	}
}

// TestBackpressureAbsorbsBurst runs, in virtual time on the fake, a
// pipeline that keeps up with a steady 200 records/s, then gets a burst of
// 10000 records at once: with backpressure, the burst is read at the
// processing rate (1000 records/s), so no batch starts more than a few
// intervals late, and every record arrives.
func TestBackpressureAbsorbsBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const steady, burst, perRecord = 1000, 10000, time.Millisecond
		fake := kinesistest.New()
		if err := fake.CreateStream("s", 2); err != nil {
			t.Fatal(err)
		}
		r, err := kinesis.New(kinesis.Config{
			Stream: "s", App: "a", Client: fake, InitialPosition: kinesis.TrimHorizon, Backpressure: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		want := make(map[string]bool, steady+burst)
		put := func(i int) {
			data := make([]byte, 10)
			copy(data, fmt.Sprintf("r%06d;", i))
			if _, _, err := fake.Put("s", fmt.Sprint(i), data); err != nil {
				t.Error(err)
			}
		}
		for i := range steady + burst {
			want[fmt.Sprintf("r%06d;", i)] = true
		}
		go func() {
			for i := range steady { // 200/s for 5s
				put(i)
				if i%20 == 19 {
					time.Sleep(100 * time.Millisecond)
				}
			}
			for i := range burst {
				put(steady + i)
			}
		}()
		d := &delays{from: time.Now().Add(time.Second)}
		got := runPipeline(t, r, steady+burst, perRecord, nil, d)
		t.Logf("worst scheduling delay: %v", d.worst())
		if worst := d.worst(); worst > 500*time.Millisecond {
			t.Errorf("worst scheduling delay %v, want the burst absorbed within a few batch intervals (500ms)", worst)
		}
		checkOnceInOrder(t, want, got)
	})
}
