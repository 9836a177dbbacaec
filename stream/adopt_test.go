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

// TestAdoptConcurrentPushesAcrossCut: a block the log holds in no batch is
// logged in one batch only, although a push adopting it (logging it in its
// batch, adopt) is slow, the batch is cut meanwhile, and a push of the next
// batch adopts too. Logged in two batches, the log is one a restart refuses
// ("block logged in batch t2, but it is in batch t1").
func TestAdoptConcurrentPushesAcrossCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		mem := recoverylog.NewMemory()
		inner, err := mem.Open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		gl := &gatedLog{Log: inner, held: make(chan struct{}), release: make(chan struct{})}
		e := &engine{ctx: ctx, log: &recoveryLog{log: recoverylog.Wrap(gl, nil), fail: func(error) {}}}
		e.cfg.maxUnbatchedBlocks = 10
		s := &sourceState[string]{}
		s.bind(e)
		// A block stored before the batch timer started, logged in no batch.
		old := batch.BlockInfo{ID: batch.BlockID{Source: 0, Seq: 0}, Count: 1,
			Ranges: []batch.SeqRange{{Stream: "s", Shard: "a", First: "1", Last: "1", Count: 1}}}
		if err := e.log.blockStored(ctx, old, 0); err != nil {
			t.Fatal(err)
		}
		s.resume(1, []batch.BlockInfo{old})

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
