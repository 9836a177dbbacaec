package kinesis_test

import (
	"context"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpointer"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/source/kinesis"
)

// TestLeasesShardEndWaitsForTheRecoveredBatch splits a shard holding
// records, runs a worker with a directory recovery log that stores all of
// the parent in a batch it never completes, kills it, and restarts it on
// the same log. The restarted reader resumes after what the log holds and
// reaches the parent's end having stored nothing, while the recovered batch
// holding the parent's records is not completed: the parent must not be
// marked SHARD_END before that batch completes. Then either the restarted
// worker completes it, or it dies for good and another worker, without its
// log, takes over: in both cases every record of the parent and of the
// children is delivered.
func TestLeasesShardEndWaitsForTheRecoveredBatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		restartedDies bool
	}{
		{"the restarted worker completes the batch", false},
		{"the restarted worker dies, another takes over", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const leaseDuration = time.Second
			f := newFleet(t, 1)
			parentData := payloads("parent", 100)
			f.put(parentData)
			parent := f.split()
			childData := payloads("child", 100)
			f.put(childData)
			dir := t.TempDir()

			// w1 stores every record of the parent and never completes
			// the batch holding them.
			drained := make(chan struct{}, 1)
			w1 := f.newWorker("w1", leaseDuration, func(c *kinesis.Config) {
				kinesis.OnShardEnd(c, func(_ context.Context, shard, _ string) {
					if shard == parent {
						drained <- struct{}{}
					}
				})
			}, recovery.Dir(dir))
			w1.hold.pause()
			f.run(w1)
			receive(t, w1.heldBatch, "w1 runs a batch with the parent's records")
			receive(t, drained, "w1 stores every record of the parent")
			w1.kill()
			if l := f.leases()[parent]; l.Checkpoint != checkpointer.TrimHorizon {
				t.Fatalf("after w1's death the parent's lease is at %q; the test needs it at %s", l.Checkpoint, checkpointer.TrimHorizon)
			}

			// w1 restarted on its log: the recovered batch holds the
			// parent's records, and its reader stores nothing more.
			w1b := f.newWorker("w1-restarted", leaseDuration, nil, recovery.Dir(dir))
			hook, checks := judgments(parent)
			kinesis.OnEndCheck(w1b.r, hook)
			w1b.hold.pause()
			f.run(w1b)
			receive(t, w1b.heldBatch, "the restarted worker runs the recovered batch")
			if ready := receiveValue(t, checks, "the restarted worker judges the parent's end"); ready {
				t.Fatal("the restarted worker would mark the parent SHARD_END while the recovered batch holding its records is not completed")
			}
			if l := f.leases()[parent]; l.Checkpoint == checkpointer.ShardEnd {
				t.Fatal("the parent is SHARD_END while the recovered batch holding its records is not completed")
			}
			all := append(append([][]byte(nil), parentData...), childData...)
			if !tc.restartedDies {
				w1b.hold.resume()
				f.waitFor("the restarted worker delivers every record, the parent's first", f.allDelivered(all))
				f.waitFor("the parent is SHARD_END once the batch completed (or deleted, its children begun)", func() bool {
					l, ok := f.leases()[parent]
					return !ok || l.Checkpoint == checkpointer.ShardEnd
				})
				w1b.drain(t)
				// The parent's end is in the lease table: the log has
				// forgotten it, so it does not grow with every shard.
				st := loadLog(t, dir)
				for k := range st.ShardSeqs {
					if k.Shard == parent {
						t.Errorf("the recovery log still holds the finished parent %s at %s", parent, st.ShardSeqs[k])
					}
				}
				if len(st.ShardSeqs) == 0 {
					t.Error("the recovery log holds no shard at all; the check above checks nothing")
				}
				return
			}
			w1b.kill()
			w2 := f.start("w2", leaseDuration, nil)
			f.waitFor("w2 takes over and delivers every record of the parent and the children", func() bool {
				return w2.deliveredAll(all)
			})
			w2.drain(t)
		})
	}
}

// judgments returns a hook for OnEndCheck or OnForgetCheck that passes on
// each judgment of shard (the first 64 not yet received; later ones are
// dropped), and the channel it passes them on.
func judgments(shard string) (func(string, bool), <-chan bool) {
	ch := make(chan bool, 64)
	return func(s string, ready bool) {
		if s == shard {
			select {
			case ch <- ready:
			default:
			}
		}
	}, ch
}

// runHeldNotReady runs w with its batches of records held until it runs
// the batch it recovered from its log and judged gets a judgment, which
// must be "not ready" (the recovered batch holds records of the shard
// judged): else the test fails, saying why it must not be ready. Then the
// batches go on.
func (f *fleet) runHeldNotReady(w *worker, judged <-chan bool, judge, why string) {
	f.t.Helper()
	t := f.t.(*testing.T)
	w.hold.pause()
	f.run(w)
	receive(t, w.heldBatch, w.id+" runs the recovered batch")
	if ready := receiveValue(t, judged, judge); ready {
		t.Fatal(why)
	}
	w.hold.resume()
}

// receive waits for a value of ch, for at most deadline.
func receive[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	receiveValue(t, ch, what)
}

// receiveValue waits for a value of ch, for at most deadline, and returns
// it.
func receiveValue[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	guard := time.NewTimer(deadline)
	defer guard.Stop()
	select {
	case v := <-ch:
		return v
	case <-guard.C:
		t.Fatalf("not within %v: %s", deadline, what)
	}
	var zero T
	return zero
}

// loadLog opens the directory recovery log at dir, no longer in use, and
// returns what a restart would recover from it.
func loadLog(t *testing.T, dir string) *recoverylog.State {
	t.Helper()
	log, err := recoverylog.Open(t.Context(), recovery.Dir(dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	st, err := recoverylog.Load(t.Context(), log)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
