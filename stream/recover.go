package stream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
)

// openLog opens the recovery log, reads the state it recovers to and checks
// the pipeline's shape against the one recorded, or records it on a first
// start. The caller closes the returned log.
func (e *engine) openLog(ctx context.Context) (*recoverylog.Log, *recoverylog.State, error) {
	l, err := recoverylog.Open(ctx, e.cfg.Recovery, e.cfg.Logger)
	if err != nil {
		return nil, nil, fmt.Errorf("stream: open recovery log: %w", err)
	}
	st, err := recoverylog.Load(ctx, l)
	if err == nil {
		err = e.checkShape(ctx, l, st)
	}
	if err != nil {
		return nil, nil, errors.Join(err, l.Close())
	}
	return l, st, nil
}

// checkShape refuses a log recorded by a pipeline of another shape, and
// records the shape in a log that has none.
func (e *engine) checkShape(ctx context.Context, l *recoverylog.Log, st *recoverylog.State) error {
	if st.Shape != nil {
		if err := recoverylog.CheckShape(*st.Shape, e.shape); err != nil {
			return fmt.Errorf("stream: %w", err)
		}
		return nil
	}
	if err := l.Append(ctx, recoverylog.ShapeRecorded(e.shape)); err != nil {
		return fmt.Errorf("stream: record the pipeline shape in the recovery log: %w", err)
	}
	return nil
}

// recoveredJob returns the job of a batch the recovery log holds, at t
// with blocks, or an error if a block is of a source the pipeline does
// not have.
func (e *engine) recoveredJob(t batch.Time, blocks []batch.BlockInfo) (*job, error) {
	j := &job{time: t, blocks: make([][]batch.BlockInfo, len(e.sources)), recovered: true}
	for _, b := range blocks {
		if b.ID.Source < 0 || b.ID.Source >= len(e.sources) {
			return nil, fmt.Errorf("stream: recovery log: batch %v holds block %v of source %d, but the pipeline has %d sources",
				t, b.ID, b.ID.Source, len(e.sources))
		}
		j.blocks[b.ID.Source] = append(j.blocks[b.ID.Source], b)
		j.records += b.Count
		j.nblocks++
	}
	return j, nil
}

// resume prepares the Run to continue from st: block numbering continues,
// the stored but unallocated blocks wait for the next batch, the pending
// batches are queued first, with their times and blocks, and new batch
// times come after every logged one.
func (e *engine) resume(st *recoverylog.State) error {
	unallocated := make([][]batch.BlockInfo, len(e.sources))
	for _, b := range st.Unallocated {
		if b.ID.Source < 0 || b.ID.Source >= len(e.sources) {
			return fmt.Errorf("stream: recovery log: block %v of source %d, but the pipeline has %d sources",
				b.ID, b.ID.Source, len(e.sources))
		}
		unallocated[b.ID.Source] = append(unallocated[b.ID.Source], b)
		if e.resumed == nil {
			e.resumed = make(map[batch.BlockID]bool)
		}
		e.resumed[b.ID] = true
	}
	for _, p := range st.Pending {
		j, err := e.recoveredJob(p.Time, p.Blocks)
		if err != nil {
			return err
		}
		j.resumed = j.records // an earlier Run's blocks (BatchInfo.RecoveredRecords)
		j.inRun = p.InRun
		e.recovered = append(e.recovered, j)
	}
	for i, s := range e.sources {
		s.resume(st.NextBlockSeq[i], unallocated[i])
	}
	e.last, e.hasLast = st.LastBatch()
	e.lastReserved = e.hasLast && st.ReservedThrough == e.last
	e.lastDone, e.hasDone = st.LastCompleted, st.HasCompleted
	if st.Snapshot != nil && st.Snapshot.Time != 0 { // the state after every batch up to its time
		e.lastDone, e.hasDone = max(e.lastDone, st.Snapshot.Time), true
	}
	seqs := maps.Clone(st.ShardSeqs)
	e.resumeAfter = func(stream, shard string) (string, bool) {
		seq, ok := seqs[recoverylog.ShardKey{Stream: stream, Shard: shard}]
		return seq, ok
	}
	open := uncompletedSeqs(st)
	e.uncompleted = func(stream, shard string) (string, bool) {
		seq, ok := open[recoverylog.ShardKey{Stream: stream, Shard: shard}]
		return seq, ok
	}
	switch {
	case e.hasLast:
		e.cfg.Logger.Info("stream: resuming from the recovery log",
			"pending", len(st.Pending), "unallocated", len(st.Unallocated), "last", e.last)
	case len(st.Pending)+len(st.Unallocated) > 0: // blocks stored, no batch yet
		e.cfg.Logger.Info("stream: resuming from the recovery log",
			"pending", len(st.Pending), "unallocated", len(st.Unallocated))
	default:
		e.cfg.Logger.Info("stream: the recovery log is empty: starting afresh")
	}
	return nil
}

// loggedUntil is source.Runtime.LoggedUntil: the time of the newest batch
// the log held at Start, or, when that is the end of a reservation of
// batch times an idle pipeline made ahead of its batches, the time it made
// it; zero if the log held none.
func (e *engine) loggedUntil() time.Time {
	if !e.hasLast {
		return time.Time{}
	}
	t := e.last.Std()
	if e.lastReserved {
		t = t.Add(-reserveAhead)
	}
	return t
}

// uncompletedSeqs returns, per shard, the greatest sequence number of the
// blocks st has not completed: those of its pending batches and its
// unallocated blocks (source.Runtime.Uncompleted).
func uncompletedSeqs(st *recoverylog.State) map[recoverylog.ShardKey]string {
	out := make(map[recoverylog.ShardKey]string)
	add := func(b batch.BlockInfo) {
		for _, r := range b.Ranges {
			k := recoverylog.ShardKey{Stream: r.Stream, Shard: r.Shard}
			out[k] = batch.MaxSeq(out[k], r.Last)
		}
	}
	for _, p := range st.Pending {
		for _, b := range p.Blocks {
			add(b)
		}
	}
	for _, b := range st.Unallocated {
		add(b)
	}
	return out
}

// readsShard notes, with a recovery log, that source src reads a shard of
// stream, and returns an error wrapping ErrInvalidConfig if another source
// reads it too: the log keeps one resume position per stream and shard
// (recoverylog.Progress.ShardSeqs), which a restart gives every source's
// receiver, so one of them would resume after the other's records and skip
// its own.
func (e *engine) readsShard(src int, stream, shard string) error {
	if e.cfg.Recovery == nil {
		return nil
	}
	k := recoverylog.ShardKey{Stream: stream, Shard: shard}
	e.shardsMu.Lock()
	defer e.shardsMu.Unlock()
	o, ok := e.shardReads[k]
	switch {
	case !ok:
		if e.shardReads == nil {
			e.shardReads = make(map[recoverylog.ShardKey]int)
		}
		e.shardReads[k] = src
		return nil
	case o == src:
		return nil
	}
	return fmt.Errorf("%w: sources %d and %d both read shard %q of stream %q, but the recovery log keeps one position "+
		"per stream and shard, where a restart resumes both, so one would skip its records: read the stream with one source "+
		"and use its stream in both places, or name the streams apart (a Kinesis stream by its ARN, a memory source by Config.Name)",
		ErrInvalidConfig, min(o, src), max(o, src), shard, stream)
}

// forSource returns f, the Runtime's ResumeAfter or Uncompleted, for the
// receiver of source src: a shard it asks about is one it reads
// (readsShard). For a shard another source reads it fails the Run and
// answers nothing.
func (e *engine) forSource(src int, f func(stream, shard string) (string, bool)) func(stream, shard string) (string, bool) {
	if f == nil {
		return nil
	}
	return func(stream, shard string) (string, bool) {
		if err := e.readsShard(src, stream, shard); err != nil {
			e.fail(err)
			return "", false
		}
		return f(stream, shard)
	}
}

// shardFinished returns the driver's source.Runtime.ShardFinished: nil
// without a recovery log.
func (e *engine) shardFinished() func(ctx context.Context, stream, shard string) error {
	if e.cfg.Recovery == nil {
		return nil
	}
	return func(ctx context.Context, stream, shard string) error {
		if stream == "" || shard == "" {
			return fmt.Errorf("stream: ShardFinished(%q, %q): empty stream or shard", stream, shard)
		}
		if err := e.log.shardFinished(ctx, stream, shard); err != nil {
			return err
		}
		// No reader starts on it again: forget who read it (readsShard).
		e.shardsMu.Lock()
		delete(e.shardReads, recoverylog.ShardKey{Stream: stream, Shard: shard})
		e.shardsMu.Unlock()
		return nil
	}
}
