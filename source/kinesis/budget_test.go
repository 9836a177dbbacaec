package kinesis_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/source"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/source/kinesis/kinesistest"
	"github.com/weirstream/weir/stream"
)

// recordMem is about what one test record of size bytes holds in the byte
// budget: its data and strings, and its Record struct (under 200 bytes).
func recordMem(size int) int64 { return int64(size) + 300 }

// putSized puts n records of size bytes (each starting with its index) on
// the fake stream, spread over its shards, and returns their payloads.
func putSized(t *testing.T, fake *kinesistest.Fake, name string, n, size int) map[string]bool {
	t.Helper()
	want := make(map[string]bool, n)
	for i := range n {
		data := make([]byte, size)
		copy(data, fmt.Sprintf("r%06d;", i))
		if _, _, err := fake.Put(name, fmt.Sprint(i), data); err != nil {
			t.Fatal(err)
		}
		want[string(data[:8])] = true
	}
	return want
}

// blockSink is a push function that keeps the pushed blocks, for a test
// that completes them itself.
type blockSink struct {
	mu        sync.Mutex
	blocks    []batch.BlockInfo
	records   []kinesis.Record
	completed int // blocks[:completed] were reported completed
}

func (s *blockSink) push(_ context.Context, b source.Block[kinesis.Record]) (batch.BlockInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := batch.BlockInfo{ID: batch.BlockID{Seq: uint64(len(s.blocks))}, Ranges: b.Ranges, Count: len(b.Records)}
	s.blocks = append(s.blocks, info)
	s.records = append(s.records, b.Records...)
	return info, nil
}

// uncompleted returns the blocks pushed and not yet completed, and marks
// them completed.
func (s *blockSink) uncompleted() []batch.BlockInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.blocks[s.completed:]
	s.completed = len(s.blocks)
	return out
}

func (s *blockSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records)
}

// TestByteBudgetHoldsReadersUntilCompleted checks, in virtual time on the
// fake, that readers stop reading once the records read and not completed
// fill the Runtime's MaxBufferedBytes (beyond it by less than a page: only a first page,
// whose record size is not known yet, can overrun its reservation), that
// they stay stopped while nothing completes, and that completions let
// them read on until every record was delivered, exactly once and in
// order: a full budget only delays, never drops.
func TestByteBudgetHoldsReadersUntilCompleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			n, size, perRead, shards = 400, 1000, 10, 2
			budget                   = 50 * 1000
		)
		fake := kinesistest.New()
		if err := fake.CreateStream("s", shards); err != nil {
			t.Fatal(err)
		}
		want := putSized(t, fake, "s", n, size)
		r, err := kinesis.New(kinesis.Config{
			Stream: "s", App: "a", Client: fake, InitialPosition: kinesis.TrimHorizon,
			RecordsPerRead: perRead, MinReadInterval: time.Millisecond, PollInterval: time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		sink := &blockSink{}
		errc := make(chan error, 1)
		go func() {
			errc <- r.Start(t.Context(), source.Runtime[kinesis.Record]{Push: sink.push, BlockInterval: 10 * time.Millisecond, MaxBufferedBytes: budget})
		}()
		limit := budget + perRead*recordMem(size)

		time.Sleep(time.Second)
		synctest.Wait()
		held := sink.count()
		if held == 0 || held >= n {
			t.Fatalf("%d of %d records read with nothing completed, want some and not all", held, n)
		}
		if st := r.Stats(); st.BufferedBytes > limit || st.BufferedBytes < budget/2 {
			t.Errorf("BufferedBytes %d with nothing completed, want about the budget %d, at most %d", st.BufferedBytes, budget, limit)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := sink.count(); got != held {
			t.Errorf("%d records read a second later with nothing completed, want still %d", got, held)
		}

		for rounds := 0; sink.count() < n; rounds++ {
			if rounds > 1000 {
				t.Fatalf("only %d of %d records after %d rounds of completions", sink.count(), n, rounds)
			}
			kinesis.BlocksCompleted(r, sink.uncompleted())
			time.Sleep(20 * time.Millisecond)
		}
		kinesis.BlocksCompleted(r, sink.uncompleted())
		if err := r.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("Start: %v", err)
		}
		st := r.Stats()
		t.Logf("budget %d, peak %d", budget, st.PeakBufferedBytes)
		if st.PeakBufferedBytes > limit {
			t.Errorf("PeakBufferedBytes %d, want at most the budget %d plus a page (%d)", st.PeakBufferedBytes, budget, limit)
		}
		if st.BufferedBytes != 0 {
			t.Errorf("BufferedBytes %d after every block completed, want 0", st.BufferedBytes)
		}
		checkOnceInOrder(t, want, sink.records)
	})
}

// checkOnceInOrder checks that got holds each wanted payload exactly once,
// and each shard's records in sequence order.
func checkOnceInOrder(t *testing.T, want map[string]bool, got []kinesis.Record) {
	t.Helper()
	seen := make(map[string]int)
	last := make(map[string]string)
	for _, r := range got {
		seen[string(r.Data[:8])]++
		if l := last[r.ShardID]; l != "" && batch.CompareSeq(r.SequenceNumber, l) <= 0 {
			t.Fatalf("shard %s: %s after %s", r.ShardID, r.SequenceNumber, l)
		}
		last[r.ShardID] = r.SequenceNumber
	}
	for k := range want {
		if seen[k] != 1 {
			t.Errorf("record %s delivered %d times, want once", k, seen[k])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d records delivered, want %d", len(got), len(want))
	}
}

// TestByteBudgetWithSlowPipeline runs a pipeline whose output is far
// slower than reading, in virtual time on the fake, and checks that the
// records held stay within the pipeline's one memory setting,
// stream.Config.MaxBufferedBytes (plus less than a page), while every
// record still arrives once, in order.
func TestByteBudgetWithSlowPipeline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			n, size, perRead, shards = 2000, 5000, 20, 4
			budget                   = 1 << 20
		)
		fake := kinesistest.New()
		if err := fake.CreateStream("s", shards); err != nil {
			t.Fatal(err)
		}
		want := putSized(t, fake, "s", n, size)
		r, err := kinesis.New(kinesis.Config{
			Stream: "s", App: "a", Client: fake, InitialPosition: kinesis.TrimHorizon,
			RecordsPerRead: perRead,
		})
		if err != nil {
			t.Fatal(err)
		}
		got := runPipelineIn(t, stream.Config{MaxBufferedBytes: budget}, r, n, 5*time.Millisecond, nil, nil)
		st := r.Stats()
		t.Logf("budget %d, peak %d", budget, st.PeakBufferedBytes)
		if limit := budget + perRead*recordMem(size); st.PeakBufferedBytes > limit {
			t.Errorf("PeakBufferedBytes %d, want at most the budget %d plus a page (%d)", st.PeakBufferedBytes, budget, limit)
		}
		if st.PeakBufferedBytes < budget/2 {
			t.Errorf("PeakBufferedBytes %d: the slow output never filled the budget %d, the test proves nothing", st.PeakBufferedBytes, budget)
		}
		checkOnceInOrder(t, want, got)
	})
}

// TestByteBudgetOnKinesalite runs a pipeline with an output slower than
// reading against kinesalite, and checks the budget holds on the real
// wire (page sizes, de-serialised records) as on the fake.
func TestByteBudgetOnKinesalite(t *testing.T) {
	t.Parallel()
	const (
		n, size, perRead, shards = 1200, 3000, 100, 2
		budget                   = 1 << 20
	)
	env := kinesis.Servers.Env(t)
	name := localaws.UniqueName(t)
	if err := env.CreateStream(t.Context(), name, shards); err != nil {
		t.Fatal(err)
	}
	data := make([][]byte, n)
	want := make(map[string]bool, n)
	for i := range data {
		data[i] = make([]byte, size)
		copy(data[i], fmt.Sprintf("r%06d;", i))
		want[string(data[i][:8])] = true
	}
	if err := env.PutRecords(t.Context(), name, data, nil); err != nil {
		t.Fatal(err)
	}
	awsCfg := env.AWSConfig()
	r, err := kinesis.New(kinesis.Config{
		Stream: name, App: "a", AWS: &awsCfg, Endpoint: env.KinesisEndpoint, InitialPosition: kinesis.TrimHorizon,
		RecordsPerRead: perRead, PollInterval: 10 * time.Millisecond, MinReadInterval: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	got := runPipelineIn(t, stream.Config{MaxBufferedBytes: budget}, r, n, 200*time.Microsecond, nil, nil)
	st := r.Stats()
	t.Logf("budget %d, peak %d", budget, st.PeakBufferedBytes)
	if limit := budget + perRead*recordMem(size); st.PeakBufferedBytes > limit {
		t.Errorf("PeakBufferedBytes %d, want at most the budget %d plus a page (%d)", st.PeakBufferedBytes, budget, limit)
	}
	checkOnceInOrder(t, want, got)
}

// TestByteBudgetSharedBySources runs, in virtual time on the fake, a
// pipeline of two Kinesis sources whose outputs are far slower than
// reading, and checks that the one memory setting,
// stream.Config.MaxBufferedBytes, bounds what both hold together: each
// source's receiver gets half, and holds at most its half plus a page.
// With records larger than a half, each page is over the budget on its
// own: it is still read, so the pipeline makes progress (the first pages
// of a source's two shard readers may overrun their reservations together,
// as DESIGN.md's bound allows). Every record arrives once, in order.
func TestByteBudgetSharedBySources(t *testing.T) {
	for _, tt := range []struct {
		name               string
		n, size, perRead   int
		perRecord          time.Duration
		wantFilled         bool // the slow outputs fill each half
		budget, maxPageMem int64
	}{
		{name: "small records", n: 1000, size: 5000, perRead: 20, perRecord: 5 * time.Millisecond, wantFilled: true, budget: 1 << 20},
		{name: "records larger than a source's share", n: 12, size: 700 << 10, perRead: 2, perRecord: 100 * time.Millisecond, budget: 1 << 20},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := kinesistest.New()
				var (
					rs   []*kinesis.Receiver
					want []map[string]bool
				)
				for _, name := range []string{"a", "b"} {
					if err := fake.CreateStream(name, 2); err != nil {
						t.Fatal(err)
					}
					want = append(want, putSized(t, fake, name, tt.n, tt.size))
					r, err := kinesis.New(kinesis.Config{
						Stream: name, App: "app", Client: fake, InitialPosition: kinesis.TrimHorizon, RecordsPerRead: tt.perRead,
					})
					if err != nil {
						t.Fatal(err)
					}
					rs = append(rs, r)
				}
				got := runSources(t, stream.Config{MaxBufferedBytes: tt.budget}, rs, tt.n, tt.perRecord)

				// DESIGN.md's bound: a receiver holds at most its share,
				// or one page if that is more, plus what pages overran
				// their reservations, which only a page of records larger
				// than the reader's last page's does: with records larger
				// than the 1 KiB a reader's first page assumes, the first
				// pages of both shard readers may overrun together (they
				// reserve before either has read).
				const shards = 2
				share, page := tt.budget/2, int64(tt.perRead)*recordMem(tt.size)
				overrun := int64(0)
				if int64(tt.size) > 1<<10 && page > share {
					overrun = shards * page
				}
				var sum int64
				for i, r := range rs {
					peak := r.Stats().PeakBufferedBytes
					t.Logf("source %d: share %d, peak %d", i, share, peak)
					sum += peak
					if limit := max(share, page) + overrun; peak > max(share+page, limit) {
						t.Errorf("source %d: PeakBufferedBytes %d, want at most its share of the budget %d plus a page (%d), or a page plus the first pages' overruns (%d)", i, peak, share, share+page, limit)
					}
					if tt.wantFilled && peak < share/2 {
						t.Errorf("source %d: PeakBufferedBytes %d: the slow output never filled its share %d, the test proves nothing", i, peak, share)
					}
					checkOnceInOrder(t, want[i], got[i])
				}
				if limit := max(tt.budget+2*page, 2*(max(share, page)+overrun)); sum > limit {
					t.Errorf("the sources' peaks add up to %d, want at most %d", sum, limit)
				}
			})
		})
	}
}

// runSources runs rs in a pipeline of 100ms batches with the other
// settings of cfg, each with an output that takes perRecord for each
// record, until each output had n records, and returns them by source.
// Call it in a synctest bubble: a pipeline stuck for an hour of its
// virtual time fails the test.
func runSources(t *testing.T, cfg stream.Config, rs []*kinesis.Receiver, n int, perRecord time.Duration) [][]kinesis.Record {
	t.Helper()
	cfg.BatchInterval, cfg.BlockInterval = 100*time.Millisecond, 20*time.Millisecond
	sc, err := stream.NewPipeline(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := make([][]kinesis.Record, len(rs)) // got[i] is touched by output i only, one batch at a time
	filled := make(chan struct{}, len(rs))   // one per output that had n records
	for i, r := range rs {
		stream.ForEachBatch(stream.From(sc, r), func(_ context.Context, b *batch.Batch[kinesis.Record]) error {
			time.Sleep(time.Duration(b.Len()) * perRecord)
			before := len(got[i])
			got[i] = append(got[i], b.Records()...)
			if before < n && len(got[i]) >= n {
				filled <- struct{}{}
			}
			return nil
		})
	}
	done := make(chan error, 1)
	go func() { done <- sc.Run(t.Context()) }()
	stuck := time.After(time.Hour) // virtual time
	for range rs {
		select {
		case <-filled:
		case err := <-done:
			t.Fatalf("pipeline stopped before every output had %d records: %v", n, err)
		case <-stuck:
			sc.Stop()
			<-done
			t.Fatalf("no progress in an hour: an output has fewer than %d records", n)
		}
	}
	sc.Drain(context.Background())
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return got
}
