package stream

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/source"
)

// gatedLog is a recovery.Log whose first append of an entry logging a
// block in a batch (recoverylog.BlockStoredIn with a time) waits for
// release, after it says so on held: an append that takes its time.
type gatedLog struct {
	recovery.Log
	held    chan struct{}
	release chan struct{}
	gated   bool
}

func (l *gatedLog) Append(ctx context.Context, records ...[]byte) error {
	entries, err := recoverylog.DecodeEntries(records)
	if err != nil {
		return err
	}
	if e := entries[0]; !l.gated && e.Kind == recoverylog.KindBlockStored && e.Batch != 0 {
		l.gated = true // only the first push gets here first: the others are released after
		close(l.held)
		<-l.release
	}
	return l.Log.Append(ctx, records...)
}

// adoptSetup returns a source of an engine whose recovery log, in memory,
// is wrapped by wrap, and the block of shard a it holds in no batch (one
// stored before the batch timer started), waiting for a batch.
func adoptSetup(t *testing.T, wrap func(recovery.Log) recovery.Log) (*recoverylog.MemoryStore, *engine, *sourceState[string], batch.BlockInfo) {
	t.Helper()
	ctx := t.Context()
	mem := recoverylog.NewMemory()
	inner, err := mem.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e := &engine{ctx: ctx, log: &recoveryLog{log: recoverylog.Wrap(wrap(inner), nil), fail: func(error) {}}}
	e.cfg.maxUnbatchedBlocks = 10
	s := &sourceState[string]{}
	s.bind(e)
	old := batch.BlockInfo{ID: batch.BlockID{Source: 0, Seq: 0}, Count: 1,
		Ranges: []batch.SeqRange{{Stream: "s", Shard: "a", First: "1", Last: "1", Count: 1}}}
	if err := e.log.blockStored(ctx, old, 0); err != nil {
		t.Fatal(err)
	}
	s.resume(1, []batch.BlockInfo{old})
	return mem, e, s, old
}

// TestAdoptConcurrentPushesAcrossCut: a block the log holds in no batch is
// logged in one batch only, although a push adopting it (logging it in its
// batch, adopt) is slow, the batch is cut meanwhile, and a push of the next
// batch adopts too. Logged in two batches, the log is one a restart refuses
// ("block logged in batch t2, but it is in batch t1").
func TestAdoptConcurrentPushesAcrossCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		var gl *gatedLog
		mem, e, s, old := adoptSetup(t, func(inner recovery.Log) recovery.Log {
			gl = &gatedLog{Log: inner, held: make(chan struct{}), release: make(chan struct{})}
			return gl
		})
		const t1, t2 = batch.Time(1000), batch.Time(2000)
		e.tags.start(t1)
		block := func(shard, seq string) source.Block[string] {
			return source.Block[string]{Records: []string{seq},
				Ranges: []batch.SeqRange{{Stream: "s", Shard: shard, First: seq, Last: seq, Count: 1}}}
		}
		errc := make(chan error, 3)
		go func() { _, err := s.push(ctx, block("b", "2")); errc <- err }() // adopts old in t1, slowly
		<-gl.held
		go func() { errc <- e.tags.cut(ctx, t1, t2) }() // the timer cuts t1 meanwhile
		synctest.Wait()
		go func() { _, err := s.push(ctx, block("c", "3")); errc <- err }() // a push of t2
		synctest.Wait()
		close(gl.release)
		for range 3 {
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
		}

		in := map[batch.Time]bool{}
		for _, en := range mem.Entries() {
			if en.Kind == recoverylog.KindBlockStored && en.Block.ID == old.ID && en.Batch != 0 {
				in[en.Batch] = true
			}
		}
		if len(in) != 1 {
			t.Errorf("block %v logged in batches %v, want one", old.ID, in)
		}
		if _, err := recoverylog.Recover(mem.Entries()); err != nil {
			t.Errorf("the log is refused at a restart: %v", err)
		}
	})
}

// TestAdoptKeepsShardOrderAcrossCut: a block the log holds in no batch is
// not put in a later batch than the next block of its shard. That push (of
// shard a, given batch t1) is descheduled between taking its time and
// adopting; the batch t1 is cut meanwhile, and a push of another shard,
// given t2, adopts first. Logged in t2, the old block of shard a would run
// after its successor, in t1.
func TestAdoptKeepsShardOrderAcrossCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		mem, e, s, old := adoptSetup(t, func(inner recovery.Log) recovery.Log { return inner })
		const t1, t2 = batch.Time(1000), batch.Time(2000)
		e.tags.start(t1)
		// The push of shard a's next block takes its time, t1, and stops
		// there for now (the steps of push, by hand).
		next := batch.BlockInfo{ID: batch.BlockID{Source: 0, Seq: 1}, Count: 1,
			Ranges: []batch.SeqRange{{Stream: "s", Shard: "a", First: "2", Last: "2", Count: 1}}}
		s.nextSeq = 2
		pt := e.tags.enter()
		cut := make(chan error, 1)
		go func() { cut <- e.tags.cut(ctx, t1, t2) }()
		synctest.Wait()
		other := source.Block[string]{Records: []string{"3"},
			Ranges: []batch.SeqRange{{Stream: "s", Shard: "b", First: "3", Last: "3", Count: 1}}}
		if _, err := s.push(ctx, other); err != nil {
			t.Fatal(err)
		}
		if err := s.adopt(ctx, pt); err != nil {
			t.Fatal(err)
		}
		if err := e.log.blockStored(ctx, next, pt); err != nil {
			t.Fatal(err)
		}
		e.tags.leave(pt)
		if err := <-cut; err != nil {
			t.Fatal(err)
		}

		if _, err := recoverylog.Recover(mem.Entries()); err != nil {
			t.Fatalf("the log is refused at a restart: %v", err)
		}
		in := map[batch.BlockID]batch.Time{}
		for _, en := range mem.Entries() {
			if en.Kind == recoverylog.KindBlockStored && en.Batch != 0 {
				in[en.Block.ID] = en.Batch
			}
		}
		if in[old.ID] == 0 || in[old.ID] > in[next.ID] {
			t.Errorf("shard a's block %v logged in batch %v, its next block %v in %v: want it no later", old.ID, in[old.ID], next.ID, in[next.ID])
		}
	})
}
