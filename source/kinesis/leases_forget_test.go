package kinesis_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/checkpointer"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/source/kinesis"
)

// TestLeasesLogForgetsAShardAnotherWorkerFinished runs a worker w1 with a
// directory recovery log that reads every record of a shard, then lets
// another worker, w2, take the shard over, split it and finish it
// (SHARD_END): while w1 is cut off from the lease table and Kinesis and
// goes on running, or while it is stopped, to be restarted on its log.
// Either way w1's log must forget the shard once the lease table shows it
// finished, as it does for a shard w1 finishes itself: else a long-lived
// worker's log keeps the position of every shard another worker finished,
// for good.
func TestLeasesLogForgetsAShardAnotherWorkerFinished(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart bool
		crash   bool // w1 dies with the shard's records in a batch not completed
	}{
		{"w1 goes on running", false, false},
		{"w1 restarts on its log", true, false},
		{"w1 crashes with the shard's records uncompleted and restarts on its log", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const leaseDuration = time.Second
			f := newFleet(t, 1)
			data := payloads("parent", 50)
			f.put(data)
			dir := t.TempDir()
			spy := newFinishSpy(recovery.Dir(dir))
			w1 := f.newWorker("w1", leaseDuration, nil, spy)
			if tc.crash {
				w1.hold.pause()
			}
			f.run(w1)
			parent := *f.shards()[0].ShardId
			if tc.crash {
				receive(t, w1.heldBatch, "w1 runs a batch with the shard's records")
				f.waitFor("w1 stores every record of the shard", func() bool {
					seq, ok := spy.storedOf(parent)
					return ok && seq == f.lastSeqs()[parent]
				})
			} else {
				f.waitFor("w1 delivers every record of the shard", func() bool { return w1.deliveredAll(data) })
			}
			if _, ok := spy.storedOf(parent); !ok {
				t.Fatalf("w1's log holds no block of shard %s; the test checks nothing", parent)
			}
			switch {
			case tc.crash:
				w1.kill()
			case tc.restart:
				w1.drain(t)
			default:
				// Cut off, w1's leases expire; it runs on.
				w1.ddb.gate.pause()
				w1.kc.gate.pause()
			}

			w2 := f.start("w2", leaseDuration, nil)
			f.waitFor("w2 takes the shard", func() bool { return w2.held()[parent] })
			if got := f.split(); got != parent {
				t.Fatalf("split shard %s, want %s", got, parent)
			}
			// The children get no records: their leases do not begin, so
			// the parent's lease is not deleted and stays at SHARD_END.
			f.waitFor("w2 marks the parent SHARD_END", func() bool {
				return f.leases()[parent].Checkpoint == checkpointer.ShardEnd
			})

			switch {
			case tc.crash:
				// The recovered batch is held until the parent is seen
				// finished: the log must not forget it before the batch
				// completes (see finishSpy.notDone).
				spy = newFinishSpy(recovery.Dir(dir))
				w1 = f.newWorker("w1-restarted", leaseDuration, nil, spy)
				hook, checks := judgments(parent)
				kinesis.OnForgetCheck(w1.r, hook)
				f.runHeldNotReady(w1, checks, "the restarted w1 judges the parent, finished by w2",
					"the restarted w1 would log the parent finished while the recovered batch holding its records is not completed")
				f.waitFor("the restarted w1 delivers the recovered records", func() bool { return w1.deliveredAll(data) })
			case tc.restart:
				spy = newFinishSpy(recovery.Dir(dir))
				w1 = f.startWith("w1-restarted", leaseDuration, nil, spy)
			default:
				w1.kc.gate.resume()
				w1.ddb.gate.resume()
			}
			f.waitFor("w1's log forgets the finished parent", func() bool { return spy.finished(parent) })
			if early := spy.notDone(); len(early) > 0 {
				t.Errorf("w1 logged the parent finished while its log held blocks of it not completed: %v", early)
			}
			w1.drain(t)
			w2.drain(t)
			st := loadLog(t, dir)
			for k, seq := range st.ShardSeqs {
				if k.Shard == parent {
					t.Errorf("w1's recovery log still holds the parent %s, finished by w2, at %s", parent, seq)
				}
			}
		})
	}
}

// finishSpy is a recovery.Opener that opens its Opener's log and watches
// the entries appended to it: the greatest sequence number of each shard
// in a stored block, and the shards logged finished.
type finishSpy struct {
	recovery.Opener

	mu      sync.Mutex
	entries []recoverylog.Entry // what the log holds, as read and appended
	stored  map[string]string
	done    map[string]bool
	early   []string // blocks pending or unallocated when their shard was logged finished
}

func newFinishSpy(o recovery.Opener) *finishSpy {
	return &finishSpy{Opener: o, stored: make(map[string]string), done: make(map[string]bool)}
}

// Open implements recovery.Opener.
func (s *finishSpy) Open(ctx context.Context) (recovery.Log, error) {
	l, err := s.Opener.Open(ctx)
	if err != nil {
		return nil, err
	}
	return &spyLog{Log: l, s: s}, nil
}

// storedOf returns the greatest sequence number of shard in a block
// appended to the log.
func (s *finishSpy) storedOf(shard string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq, ok := s.stored[shard]
	return seq, ok
}

// notDone returns the blocks that the log held uncompleted (pending or
// unallocated) when a shard of theirs was logged finished.
func (s *finishSpy) notDone() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.early)
}

// finished reports whether shard was logged finished.
func (s *finishSpy) finished(shard string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done[shard]
}

type spyLog struct {
	recovery.Log
	s *finishSpy
}

// Read implements recovery.Log.
func (l *spyLog) Read(ctx context.Context) ([][]byte, error) {
	records, err := l.Log.Read(ctx)
	if err == nil {
		l.s.reset(records)
	}
	return records, err
}

// Replace implements recovery.Log.
func (l *spyLog) Replace(ctx context.Context, records [][]byte) error {
	err := l.Log.Replace(ctx, records)
	if err == nil {
		l.s.reset(records)
	}
	return err
}

// Append implements recovery.Log.
func (l *spyLog) Append(ctx context.Context, records ...[]byte) error {
	if err := l.Log.Append(ctx, records...); err != nil {
		return err
	}
	entries, err := recoverylog.DecodeEntries(records)
	if err != nil {
		panic(err) // the driver writes entries only
	}
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	for _, e := range entries {
		switch e.Kind {
		case recoverylog.KindBlockStored:
			for _, r := range e.Block.Ranges {
				l.s.stored[r.Shard] = batch.MaxSeq(l.s.stored[r.Shard], r.Last)
			}
		case recoverylog.KindShardFinished:
			l.s.done[e.Shard.Shard] = true
			l.s.checkDoneLocked(e.Shard.Shard)
		}
		l.s.entries = append(l.s.entries, e)
	}
	return nil
}

// reset makes records what the log holds.
func (s *finishSpy) reset(records [][]byte) {
	entries, err := recoverylog.DecodeEntries(records)
	if err != nil {
		panic(err)
	}
	s.mu.Lock()
	s.entries = entries
	s.mu.Unlock()
}

// checkDoneLocked notes each block of shard the log holds uncompleted.
func (s *finishSpy) checkDoneLocked(shard string) {
	st, err := recoverylog.Recover(s.entries)
	if err != nil {
		s.early = append(s.early, err.Error())
		return
	}
	blocks := slices.Clone(st.Unallocated)
	for _, p := range st.Pending {
		blocks = append(blocks, p.Blocks...)
	}
	for _, b := range blocks {
		for _, r := range b.Ranges {
			if r.Shard == shard {
				s.early = append(s.early, fmt.Sprintf("block %v (%s %s..%s)", b.ID, shard, r.First, r.Last))
			}
		}
	}
}
