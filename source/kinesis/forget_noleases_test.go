package kinesis_test

import (
	"slices"
	"testing"
	"time"

	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/source/kinesis"
)

// noLeases makes a worker read every shard itself, without a lease table.
func noLeases(c *kinesis.Config) { c.Leases = nil }

// newParentWorker puts 50 records on a new stream of one shard, parent,
// and returns a worker w1 without leases, not yet run, whose directory
// recovery log at dir is watched by spy.
func newParentWorker(t *testing.T) (f *fleet, data [][]byte, parent, dir string, spy *finishSpy, w1 *worker) {
	t.Helper()
	f = newFleet(t, 1)
	data = payloads("parent", 50)
	f.put(data)
	dir = t.TempDir()
	spy = newFinishSpy(recovery.Dir(dir))
	return f, data, *f.shards()[0].ShardId, dir, spy, f.newWorker("w1", time.Second, noLeases, spy)
}

// TestLogForgetsAFinishedParentWithoutLeases runs one worker without leases
// and with a directory recovery log: it reads a shard, which is then split,
// and must have the log forget the parent once that is safe, else the log
// keeps every shard a stream resharded daily ever had, for good. Safe means
// every record of the parent is completed and a restart cannot read the
// parent again: Kinesis no longer lists it (its records passed the
// retention period; here a client hides it), or a child's position is in
// the log, which tells a restart the parent was read to its end. Then a
// restart on the log delivers only the records put after it: nothing read
// again, nothing lost.
func TestLogForgetsAFinishedParentWithoutLeases(t *testing.T) {
	for _, tc := range []struct {
		name     string
		children bool // the children get records before the restart
	}{
		{"a child read records, the parent still listed", true},
		{"the children empty, the parent no longer listed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, data, parent, dir, spy, w1 := newParentWorker(t)
			hook, checks := judgments(parent)
			kinesis.OnForgetCheck(w1.r, hook)
			f.run(w1)
			f.waitFor("w1 delivers every record of the shard", func() bool { return w1.deliveredAll(data) })
			if got := f.split(); got != parent {
				t.Fatalf("split shard %s, want %s", got, parent)
			}
			lastSeq := f.lastSeqs()[parent]
			f.waitFor("w1 reads the parent to its end and completes it", func() bool {
				st := w1.r.Stats().Shards[parent]
				return st.Drained && st.LatestCompleted == lastSeq
			})
			if tc.children {
				more := payloads("child", 50)
				f.put(more)
				data = append(data, more...)
				f.waitFor("w1 delivers every record of the children", func() bool { return w1.deliveredAll(data) })
			} else {
				// Completed, but listed, with children that have no
				// position in the log: a restart would find the parent
				// without a position and read it again.
				for len(checks) > 0 {
					<-checks
				}
				if ready := receiveValue(t, checks, "w1 judges the finished parent"); ready {
					t.Fatal("w1 would have its log forget the parent while Kinesis lists it and no child has a position in the log")
				}
				if spy.finished(parent) {
					t.Fatal("w1's log forgot the parent while Kinesis lists it and no child has a position in the log")
				}
				w1.kc.hide(parent)
			}
			f.waitFor("w1's log forgets the finished parent", func() bool { return spy.finished(parent) })
			if early := spy.notDone(); len(early) > 0 {
				t.Errorf("w1 logged the parent finished while its log held blocks of it not completed: %v", early)
			}
			w1.drain(t)
			st := loadLog(t, dir)
			for k, seq := range st.ShardSeqs {
				if k.Shard == parent {
					t.Errorf("w1's recovery log still holds the finished parent %s, at %s", parent, seq)
				}
			}
			if tc.children && len(st.ShardSeqs) == 0 {
				t.Error("w1's recovery log holds no child: the test checks no restart past a child's position")
			}

			w2 := f.newWorker("w2", time.Second, noLeases, newFinishSpy(recovery.Dir(dir)))
			if !tc.children {
				w2.kc.hide(parent)
			}
			f.run(w2)
			after := payloads("after", 30)
			f.put(after)
			// A parent read again would be delivered first: its children
			// start once it is drained.
			f.waitFor("the restarted worker delivers the records put after the restart", func() bool { return w2.deliveredAll(after) })
			w2.drain(t)
			checkDeliveredOnly(t, w2, after)
		})
	}
}

// TestLogForgetsAnUnlistedParentOnlyOnceRecomputed crashes a worker
// without leases whose log holds a batch of a shard's records not
// completed; the shard is split, and Kinesis no longer lists it when the
// worker restarts on its log (here a client hides it). The restart never
// reads the shard, and finds it only as the parent of the shards listed:
// it must have the log forget it, but only once the batch recovered from
// the log, which holds its records, is completed.
func TestLogForgetsAnUnlistedParentOnlyOnceRecomputed(t *testing.T) {
	f, data, parent, dir, spy, w1 := newParentWorker(t)
	w1.hold.pause()
	f.run(w1)
	receive(t, w1.heldBatch, "w1 runs a batch with the shard's records")
	lastSeq := f.lastSeqs()[parent]
	f.waitFor("w1 stores every record of the shard", func() bool {
		seq, ok := spy.storedOf(parent)
		return ok && seq == lastSeq
	})
	if got := f.split(); got != parent {
		t.Fatalf("split shard %s, want %s", got, parent)
	}
	w1.kill()

	spy = newFinishSpy(recovery.Dir(dir))
	w2 := f.newWorker("w2", time.Second, noLeases, spy)
	w2.kc.hide(parent)
	hook, checks := judgments(parent)
	kinesis.OnForgetCheck(w2.r, hook)
	f.runHeldNotReady(w2, checks, "the restarted worker judges the unlisted parent",
		"the restarted worker would have its log forget the parent while the recovered batch holding its records is not completed")
	f.waitFor("the restarted worker's log forgets the unlisted parent", func() bool { return spy.finished(parent) })
	if early := spy.notDone(); len(early) > 0 {
		t.Errorf("the restarted worker logged the parent finished while its log held blocks of it not completed: %v", early)
	}
	after := payloads("after", 30)
	f.put(after)
	f.waitFor("the restarted worker delivers the records put after the restart", func() bool { return w2.deliveredAll(after) })
	w2.drain(t)
	checkDeliveredOnly(t, w2, append(data, after...))
	for k, seq := range loadLog(t, dir).ShardSeqs {
		if k.Shard == parent {
			t.Errorf("the recovery log still holds the finished parent %s, at %s", parent, seq)
		}
	}
}

// checkDeliveredOnly checks that w's output received each payload of want
// once, and nothing else.
func checkDeliveredOnly(t *testing.T, w *worker, want [][]byte) {
	t.Helper()
	seen := map[string]int{}
	for _, r := range w.records() {
		seen[string(r.Data)]++
	}
	for _, p := range want {
		if seen[string(p)] != 1 {
			t.Errorf("%s delivered %s %d times, want 1", w.id, p, seen[string(p)])
		}
		delete(seen, string(p))
	}
	for p, n := range seen {
		t.Errorf("%s delivered %s (%d times), not expected: read again", w.id, p, n)
	}
}

// TestLatestRestartReadsChildrenOfALoggedParent runs a worker without
// leases at LATEST with a directory recovery log, stops it after it read a
// shard, and splits the shard while it is down, putting records on the
// children. The restart resumes the shard from the log (its position is
// there), so LATEST applies no more to what descends from it: its
// children must be read from their start, or the records put on them
// while the worker was down are lost.
func TestLatestRestartReadsChildrenOfALoggedParent(t *testing.T) {
	f := newFleet(t, 1)
	dir := t.TempDir()
	w1 := f.newWorker("w1", time.Second, latestWithoutLeases, newFinishSpy(recovery.Dir(dir)))
	f.run(w1)
	f.waitReading(w1) // at LATEST, some time after its Run
	data := payloads("parent", 20)
	f.put(data)
	f.waitFor("w1 delivers the records put after it started", func() bool { return w1.deliveredAll(data) })
	w1.drain(t)

	parent := f.split()
	down := payloads("down", 30)
	f.put(down)

	w2 := f.newWorker("w2", time.Second, latestWithoutLeases, newFinishSpy(recovery.Dir(dir)))
	f.run(w2)
	f.waitFor("the restarted worker delivers the records put on the children while it was down",
		func() bool { return w2.deliveredAll(down) })
	w2.drain(t)
	checkDeliveredOnly(t, w2, down)
	if st := loadLog(t, dir); len(st.ShardSeqs) == 0 {
		t.Errorf("the log holds no shard after the restart (parent %s)", parent)
	}
}

// TestLatestRestartReadsWhatWasPutWhileDown runs a worker without leases
// at LATEST with a directory recovery log on a stream that gets no record,
// stops it, then puts records on the shard, splits it and puts records on
// its children while it is down. The log holds no position of any of them:
// the shard delivered nothing. The restart must read them all from about
// when the first Run was last alive, not at LATEST, which skips them.
func TestLatestRestartReadsWhatWasPutWhileDown(t *testing.T) {
	f := newFleet(t, 1)
	dir := t.TempDir()
	w1 := f.newWorker("w1", time.Second, latestWithoutLeases, newFinishSpy(recovery.Dir(dir)))
	f.run(w1)
	f.waitFor("w1 reads the empty shard", func() bool { // no probe: the shard must deliver nothing
		for _, sh := range w1.r.Stats().Shards {
			if sh.Reading && slices.ContainsFunc(sh.GetRecordsLatency, func(n int64) bool { return n > 0 }) {
				return true
			}
		}
		return false
	})
	w1.drain(t)
	if len(w1.records()) != 0 {
		t.Fatalf("w1 delivered %d records of an empty stream", len(w1.records()))
	}

	before := payloads("before-split", 10)
	f.put(before)
	f.split()
	after := payloads("after-split", 20)
	f.put(after)
	want := append(before, after...)

	w2 := f.newWorker("w2", time.Second, latestWithoutLeases, newFinishSpy(recovery.Dir(dir)))
	f.run(w2)
	f.waitFor("the restarted worker delivers the records put while it was down",
		func() bool { return w2.deliveredAll(want) })
	w2.drain(t)
	checkDeliveredOnly(t, w2, want)
}

// latestWithoutLeases configures a worker without leases at LATEST.
func latestWithoutLeases(c *kinesis.Config) {
	c.Leases = nil
	c.InitialPosition = kinesis.Latest
}
