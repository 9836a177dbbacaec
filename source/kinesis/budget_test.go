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
// fill MaxBufferedBytes (beyond it by less than a page: only a first page,
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
			MaxBufferedBytes: budget,
		})
		if err != nil {
			t.Fatal(err)
		}
		sink := &blockSink{}
		errc := make(chan error, 1)
		go func() {
			errc <- r.Start(t.Context(), source.Runtime[kinesis.Record]{Push: sink.push, BlockInterval: 10 * time.Millisecond})
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
// records held stay within the budget (plus less than a page)
// while every record still arrives once, in order.
func TestByteBudgetWithSlowPipeline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			n, size, perRead, shards = 2000, 1000, 100, 4
			budget                   = 200 * 1000
		)
		fake := kinesistest.New()
		if err := fake.CreateStream("s", shards); err != nil {
			t.Fatal(err)
		}
		want := putSized(t, fake, "s", n, size)
		r, err := kinesis.New(kinesis.Config{
			Stream: "s", App: "a", Client: fake, InitialPosition: kinesis.TrimHorizon,
			RecordsPerRead: perRead, MaxBufferedBytes: budget,
		})
		if err != nil {
			t.Fatal(err)
		}
		got := runPipeline(t, r, n, 5*time.Millisecond, nil, nil)
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
	const (
		n, size, perRead, shards = 1500, 1000, 100, 2
		budget                   = 150 * 1000
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
		MaxBufferedBytes: budget,
	})
	if err != nil {
		t.Fatal(err)
	}
	got := runPipeline(t, r, n, 200*time.Microsecond, nil, nil)
	st := r.Stats()
	t.Logf("budget %d, peak %d", budget, st.PeakBufferedBytes)
	if limit := budget + perRead*recordMem(size); st.PeakBufferedBytes > limit {
		t.Errorf("PeakBufferedBytes %d, want at most the budget %d plus a page (%d)", st.PeakBufferedBytes, budget, limit)
	}
	checkOnceInOrder(t, want, got)
}
