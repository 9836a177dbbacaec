package stream

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/recovery"
)

// StoredCheckpointer is implemented by a receiver that can tell whether it
// checkpoints the sequence numbers of blocks that are stored but not yet
// completed. weir's own Kinesis receiver never does (it checkpoints the
// records of completed batches only, with any recovery log): the
// declaration is for third-party receivers that do.
//
// Such checkpoints are safe only if every stored block is in a recovery
// log that any future owner of the shard can read (DESIGN.md, guarantee
// G4): otherwise a worker that takes a shard over after a crash starts
// after records that no completed batch holds and no log it can read
// names, and they are lost. Run therefore refuses to start, with an error
// wrapping ErrInvalidConfig, when such a receiver says true and
// Config.Recovery is not a shared log (nil, recovery.Dir, a MemoryStore).
//
// A shared log is necessary, not sufficient: the driver recovers only from
// its own log (Config.Recovery), so a receiver that checkpoints stored
// numbers must itself see to it that the new owner of a shard recomputes
// the blocks the old owner logged but did not complete (or that the old
// owner always comes back with its log). A receiver that follows
// source.Runtime.SharedLog (checkpointing stored numbers only when it is
// true) needs no such declaration, but takes on the same duty.
type StoredCheckpointer interface {
	CheckpointsStored() bool
}

// isSharedLog reports whether the logs o opens can be read by any worker:
// a DynamoDB log, or an Opener that says so with SharedLog() bool.
func isSharedLog(o recovery.Opener) bool {
	switch o := o.(type) {
	case recovery.DynamoConfig, *recovery.DynamoConfig:
		return true
	case interface{ SharedLog() bool }:
		return o.SharedLog()
	}
	return false
}

// checkpointProblemsLocked returns the G4 problems of the pipeline: every
// receiver that checkpoints stored records without a shared log. p.mu is
// held.
func (p *Pipeline) checkpointProblemsLocked() []error {
	if isSharedLog(p.cfg.Recovery) {
		return nil
	}
	what := "nil (no recovery log)"
	if p.cfg.Recovery != nil {
		what = fmt.Sprintf("a %T, which only this machine can read", p.cfg.Recovery)
	}
	var problems []error
	for i, s := range p.sources {
		c, ok := s.receiver().(StoredCheckpointer)
		if !ok || !c.CheckpointsStored() {
			continue
		}
		problems = append(problems, fmt.Errorf("source %d (%v) checkpoints stored, not yet completed, records, but Recovery is %s: "+
			"after a crash, a worker taking its shards over would start after records that are neither in a "+
			"completed batch nor in a log it can read, and lose them (DESIGN.md, G4): set Config.Recovery to a "+
			"recovery.DynamoConfig (and have the receiver's new owners recompute the blocks of that log), or "+
			"configure the receiver to checkpoint completed records only, as weir's Kinesis receiver always does",
			i, s.component(), what))
	}
	return problems
}

// openLog opens the recovery log, reads the state it recovers to and checks
// the pipeline's shape against the one recorded, or records it on a first
// start. The caller closes the returned log.
func (e *engine) openLog(ctx context.Context) (recovery.Log, *recovery.State, error) {
	l, err := e.cfg.Recovery.Open(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("stream: open recovery log: %w", err)
	}
	st, err := recovery.Load(ctx, l)
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
func (e *engine) checkShape(ctx context.Context, l recovery.Log, st *recovery.State) error {
	if st.Shape != nil {
		if err := recovery.CheckShape(*st.Shape, e.shape); err != nil {
			return fmt.Errorf("stream: %w", err)
		}
		return nil
	}
	if err := l.Append(ctx, recovery.ShapeRecorded(e.shape)); err != nil {
		return fmt.Errorf("stream: record the pipeline shape in the recovery log: %w", err)
	}
	return nil
}

// resume prepares the Run to continue from st: block numbering continues,
// the stored but unallocated blocks wait for the next batch, the pending
// batches are queued first, with their times and blocks, and new batch
// times come after every logged one.
func (e *engine) resume(st *recovery.State) error {
	unallocated := make([][]batch.BlockInfo, len(e.sources))
	for _, b := range st.Unallocated {
		if b.ID.Source < 0 || b.ID.Source >= len(e.sources) {
			return fmt.Errorf("stream: recovery log: block %v of source %d, but the pipeline has %d sources",
				b.ID, b.ID.Source, len(e.sources))
		}
		unallocated[b.ID.Source] = append(unallocated[b.ID.Source], b)
	}
	for _, p := range st.Pending {
		j := &job{time: p.Time, blocks: make([][]batch.BlockInfo, len(e.sources)), recovered: true}
		for _, b := range p.Blocks {
			if b.ID.Source < 0 || b.ID.Source >= len(e.sources) {
				return fmt.Errorf("stream: recovery log: batch %v holds block %v of source %d, but the pipeline has %d sources",
					p.Time, b.ID, b.ID.Source, len(e.sources))
			}
			j.blocks[b.ID.Source] = append(j.blocks[b.ID.Source], b)
			j.records += b.Count
			j.nblocks++
		}
		e.recovered = append(e.recovered, j)
	}
	for i, s := range e.sources {
		s.resume(st.NextBlockSeq[i], unallocated[i])
	}
	e.last, e.hasLast = st.LastBatch()
	seqs := maps.Clone(st.ShardSeqs)
	e.resumeAfter = func(stream, shard string) (string, bool) {
		seq, ok := seqs[recovery.ShardKey{Stream: stream, Shard: shard}]
		return seq, ok
	}
	e.sharedLog = isSharedLog(e.cfg.Recovery)
	e.cfg.Logger.Info("stream: resuming from the recovery log",
		"pending", len(st.Pending), "unallocated", len(st.Unallocated), "last", e.last)
	return nil
}
