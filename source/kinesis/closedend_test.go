package kinesis

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source"
	"github.com/weirstream/weir/source/kinesis/kinesistest"
)

// noIteratorAt is the fake, except that GetShardIterator answers no
// ShardIterator for shard at the positions listed ("TYPE seq"), as Kinesis
// does for a closed shard with no record from the position on.
type noIteratorAt struct {
	*kinesistest.Fake
	shard string
	at    map[string]bool
}

func (c *noIteratorAt) GetShardIterator(ctx context.Context, in *awskinesis.GetShardIteratorInput, o ...func(*awskinesis.Options)) (*awskinesis.GetShardIteratorOutput, error) {
	out, err := c.Fake.GetShardIterator(ctx, in, o...)
	if err == nil && aws.ToString(in.ShardId) == c.shard && c.at[string(in.ShardIteratorType)+" "+aws.ToString(in.StartingSequenceNumber)] {
		out.ShardIterator = nil
	}
	return out, err
}

// TestClosedShardWithoutIteratorEnds: a restart resumes a closed shard
// after its last record, and Kinesis answers no iterator. The reader takes
// the shard as read to its end, as the KCL does: it reports the end and
// reads the children, rather than fail every start with the
// ValidationException a GetRecords without an iterator gets.
func TestClosedShardWithoutIteratorEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := kinesistest.New()
		if err := fake.CreateStream("s", 1); err != nil {
			t.Fatal(err)
		}
		parent, last, err := fake.Put("s", "k", []byte("old"))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := fake.SplitShard("s", parent); err != nil {
			t.Fatal(err)
		}
		if _, _, err := fake.Put("s", "k", []byte("new")); err != nil {
			t.Fatal(err)
		}
		client := &noIteratorAt{Fake: fake, shard: parent, at: map[string]bool{"AFTER_SEQUENCE_NUMBER " + last: true}}
		r, err := New(Config{Stream: "s", App: "a", Client: client, InitialPosition: TrimHorizon, PollInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var ended []string
		r.cfg.onShardEnd = func(_ context.Context, shard, lastSeq string) {
			mu.Lock()
			defer mu.Unlock()
			ended = append(ended, shard+"@"+lastSeq)
		}
		c := newCollector(1)
		errc := make(chan error, 1)
		go func() {
			errc <- r.Start(t.Context(), source.Runtime[Record]{
				Push: c.push,
				ResumeAfter: func(_, shard string) (string, bool) {
					return last, shard == parent
				},
			})
		}()
		select {
		case err := <-errc:
			t.Fatalf("Start: %v", err)
		case <-c.full:
		case <-time.After(time.Minute):
			t.Fatal("the child's record not read in a minute")
		}
		if err := r.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("Start: %v", err)
		}
		var got []string
		for _, rec := range c.records() {
			got = append(got, string(rec.Data))
		}
		if diff := cmp.Diff([]string{"new"}, got); diff != "" {
			t.Errorf("records (-want +got):\n%s", diff)
		}
		mu.Lock()
		defer mu.Unlock()
		if diff := cmp.Diff([]string{parent + "@"}, ended); diff != "" { // nothing of it stored by this run
			t.Errorf("shard ends (-want +got):\n%s", diff)
		}
	})
}

// TestRecomputeWithoutIteratorIsUnavailable: a range of a closed shard
// Kinesis answers no iterator for is a *RangeUnavailableError (skipped with
// SkipUnavailableRanges), not a GetRecords refused for its missing
// iterator.
func TestRecomputeWithoutIteratorIsUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := kinesistest.New()
		if err := fake.CreateStream("s", 1); err != nil {
			t.Fatal(err)
		}
		shard, seq, err := fake.Put("s", "k", []byte("a"))
		if err != nil {
			t.Fatal(err)
		}
		client := &noIteratorAt{Fake: fake, shard: shard, at: map[string]bool{"AT_SEQUENCE_NUMBER " + seq: true}}
		info := batch.BlockInfo{Count: 1, Ranges: []batch.SeqRange{{Stream: "s", Shard: shard, First: seq, Last: seq, Count: 1}}}
		for _, skip := range []bool{false, true} {
			r, err := New(Config{Stream: "s", App: "a", Client: client, SkipUnavailableRanges: skip})
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.Recompute(t.Context(), info)
			var unavailable *RangeUnavailableError
			switch {
			case skip && (!errors.As(err, new(*source.RangesSkippedError)) || len(got) != 0 || r.Stats().RangesSkipped != 1):
				t.Errorf("skipping: Recompute = %v, %v with %d ranges skipped; want no records, a *source.RangesSkippedError, one range skipped", got, err, r.Stats().RangesSkipped)
			case !skip && (!errors.As(err, &unavailable) || !errors.Is(err, errClosedEnd)):
				t.Errorf("Recompute error %v, want a *RangeUnavailableError for the missing iterator", err)
			}
		}
	})
}

// TestFanOutEndCheckWithoutIterator: the end-of-shard check of a fan-out
// reader takes no iterator from Kinesis as the shard's end.
func TestFanOutEndCheckWithoutIterator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		subs := &subscriptions{calls: make(chan *scriptedSub), refuse: make(chan error)}
		fake := &shardFake{consumerFake: consumerFake{describes: []types.ConsumerStatus{types.ConsumerStatusActive}}, noIterator: true}
		r, err := New(Config{
			Stream: "s", App: "app", InitialPosition: TrimHorizon, Client: fake,
			FanOut: &FanOutConfig{subscribe: subs.subscribe},
		})
		if err != nil {
			t.Fatal(err)
		}
		var ended []string
		r.cfg.onShardEnd = func(_ context.Context, shard, lastSeq string) { ended = append(ended, shard+"@"+lastSeq) }
		c := newCollector(0)
		errc := make(chan error, 1)
		go func() {
			errc <- r.Start(t.Context(), source.Runtime[Record]{Push: c.push, BlockInterval: 10 * time.Millisecond})
		}()
		s1 := subs.next(t, nil, types.ShardIteratorTypeTrimHorizon, "")
		s1.send(t, "2", 1, 2)
		s1.send(t, "2") // caught up: the end-of-shard check runs
		synctest.Wait()
		if err := r.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("Start: %v", err)
		}
		if diff := cmp.Diff([]string{"shard-0@2"}, ended); diff != "" {
			t.Errorf("onShardEnd calls (-want +got):\n%s", diff)
		}
		if fake.probes != 0 {
			t.Errorf("%d GetRecords calls without an iterator", fake.probes)
		}
	})
}

// TestToRead: the records left to read of a range, in the pages that read
// it back; the head of a first aggregate a block left out does not count.
func TestToRead(t *testing.T) {
	rng := batch.SeqRange{First: "10", Last: "20", Count: 4}
	recs := func(seqs ...string) []Record {
		var out []Record
		for _, s := range seqs {
			out = append(out, Record{SequenceNumber: s})
		}
		return out
	}
	for _, tt := range []struct {
		name string
		out  []Record
		want int
	}{
		{"nothing read", nil, 4},
		{"some read", recs("10", "12"), 2},
		// An aggregate of 6 at First, of which the block holds the last 2:
		// 2 are left, at most 4 (the records at First not counted).
		{"a head left out", recs("10", "10", "10", "10", "10", "10"), 4},
		{"a head left out, then one more", recs("10", "10", "10", "10", "10", "10", "12"), 3},
	} {
		if got := toRead(rng, tt.out); got != tt.want {
			t.Errorf("%s: toRead = %d, want %d", tt.name, got, tt.want)
		}
	}
}
