package stream

import (
	"context"
	"sync"
)

// recomputed is a block of a recovered batch that the prefetcher recomputes
// ahead of the batch. The prefetcher sets recs, err and bytes, then closes
// done; after that only the batch runner uses recs and err.
type recomputed struct {
	done  chan struct{}
	recs  any // the block's records: a rebuilt[T] of its source
	err   error
	bytes int64 // guarded by prefetcher.mu: the records' bytes, or their estimate while recomputed
}

// prefetcher recomputes the blocks of the batches recovered from the log
// (those replayed for the state, then the pending ones) ahead of the batch
// runner, so that a restart reads the ranges of many blocks, and of many
// shards, at once instead of one block after the other. It starts them in
// batch order, then block order, at most Config.Parallelism at a time, and
// no further ahead than the batches the runner may have queued
// (maxPendingBatches past the one it runs): it holds no more records than
// the pipeline holds for its queued batches when it runs live. Nor does it
// hold, for a source, more bytes of recomputed records (recordSizer) than
// the source's receiver's share of Config.MaxBufferedBytes: a block of a
// batch after the one the runner needs waits until its estimated bytes
// (the source's bytes per record so far times its count) fit beside those
// of the blocks recomputed and not yet run, or none is held (a block larger
// than the share is recomputed alone); the blocks of the batch the runner
// needs never wait for bytes, which would wait for that batch forever.
// Each batch still applies its blocks in order, so its records are those
// of a sequential recomputation (G2).
type prefetcher struct {
	jobs   []*job // the recovered batches, in run order
	par    int
	window int   // batches whose blocks may be recomputed: the running one and those queued after it
	limit  int64 // bytes of recomputed records held per source; <= 0: no limit

	mu      sync.Mutex
	ran     int           // recovered batches the runner is done with
	held    []heldBytes   // by source: what its recomputed blocks hold
	changed chan struct{} // closed and replaced when ran grows or held changes
}

// heldBytes is what a source's recomputed blocks hold, for the byte bound.
type heldBytes struct {
	bytes  int64 // of the blocks recomputed or being recomputed (their estimate), not yet run
	blocks int   // those blocks
	// measured bytes and records of the blocks recomputed so far: the
	// bytes per record of the estimates.
	measured, records int64
}

// estimate returns the bytes a block of count records is expected to hold,
// and false if nothing of the source has been measured yet.
func (h *heldBytes) estimate(count int) (int64, bool) {
	if h.records == 0 {
		return 0, false
	}
	return h.measured * int64(count) / h.records, true
}

// newPrefetcher plans the recomputation of the blocks of the recovered
// batches: for each batch, the blocks of the sources it reads (those an
// output reads, or, for a batch replayed for the state only, those a
// stateful operator reads). It returns nil when there is nothing to
// recompute. Called before the Run's goroutines start.
func (e *engine) newPrefetcher() *prefetcher {
	forOutputs, forState := e.sourcesRead()
	n := 0
	for _, j := range e.recovered {
		reads := forOutputs
		if j.replay {
			reads = forState
		}
		j.ahead = make([][]*recomputed, len(e.sources))
		for i, blocks := range j.blocks {
			if !reads[i] {
				continue
			}
			j.ahead[i] = make([]*recomputed, len(blocks))
			for b := range blocks {
				j.ahead[i][b] = &recomputed{done: make(chan struct{})}
			}
			n += len(blocks)
		}
	}
	if n == 0 {
		return nil
	}
	return &prefetcher{jobs: e.recovered, par: max(e.cfg.Parallelism, 1),
		window: e.cfg.maxPendingBatches + 1, limit: e.bufferShare(),
		held: make([]heldBytes, len(e.sources)), changed: make(chan struct{})}
}

// sourcesRead tells, by source index, the sources an output reads and
// those a stateful operator reads.
func (e *engine) sourcesRead() (forOutputs, forState []bool) {
	nodes := make([]*node, 0, len(e.outputs))
	for _, o := range e.outputs {
		nodes = append(nodes, o.n)
	}
	return e.sourcesUnder(nodes), e.sourcesUnder(e.ticks)
}

// sourcesUnder tells, by source index, the sources that nodes are computed
// from.
func (e *engine) sourcesUnder(nodes []*node) []bool {
	seen := make(map[*node]bool)
	var mark func(n *node)
	mark = func(n *node) {
		if seen[n] {
			return
		}
		seen[n] = true
		for _, p := range n.parents {
			mark(p)
		}
	}
	for _, n := range nodes {
		mark(n)
	}
	out := make([]bool, len(e.sources))
	for i, s := range e.sources {
		out[i] = seen[s.graphNode()]
	}
	return out
}

// run recomputes the planned blocks until every one has started and
// returned, or ctx is done. A failure is kept for the batch that needs the
// block, which fails with it when it gets there, as it would have without
// prefetching.
func (p *prefetcher) run(ctx context.Context, sources []sourceRunner) {
	slots := make(chan struct{}, p.par)
	var wg sync.WaitGroup
	defer wg.Wait()
	for k, j := range p.jobs {
		for i, fs := range j.ahead {
			for b, f := range fs {
				info, s := j.blocks[i][b], sources[i]
				if !p.await(ctx, k, i, f, info.Count) {
					return
				}
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return
				}
				wg.Go(func() {
					defer func() { <-slots }()
					var bytes int64
					f.err = safely(func() (err error) {
						f.recs, bytes, err = s.rebuild(ctx, info)
						return err
					})
					p.measured(i, f, bytes, info.Count)
					close(f.done)
				})
			}
		}
	}
}

// await waits until block f (of source i, count records) of recovered
// batch k may be recomputed: the runner is close enough to k, and the
// block's bytes fit (see prefetcher). It then counts the block's estimated
// bytes as held. It reports false if ctx was done first.
func (p *prefetcher) await(ctx context.Context, k, i int, f *recomputed, count int) bool {
	for {
		p.mu.Lock()
		h := &p.held[i]
		est, known := h.estimate(count)
		fits := k == p.ran || p.limit <= 0 || h.blocks == 0 || (known && h.bytes+est <= p.limit)
		ready, changed := k < p.ran+p.window && fits, p.changed
		if ready {
			f.bytes = est
			h.bytes += est
			h.blocks++
		}
		p.mu.Unlock()
		if ready {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}

// measured replaces the estimated bytes of block f (of source i, count
// records) by those its records hold, and learns from them.
func (p *prefetcher) measured(i int, f *recomputed, bytes int64, count int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := &p.held[i]
	h.bytes += bytes - f.bytes
	f.bytes = bytes
	if count > 0 && bytes > 0 {
		h.measured += bytes
		h.records += int64(count)
	}
	p.changedLocked()
}

// finished is called by the runner after each recovered batch: it drops
// the batch's recomputed records, waiting for those still being recomputed
// (or ctx), and lets the prefetcher go one batch further.
func (p *prefetcher) finished(ctx context.Context, j *job) {
	for _, fs := range j.ahead {
		for _, f := range fs {
			select {
			case <-f.done:
				f.recs = nil
			case <-ctx.Done():
				return
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, fs := range j.ahead {
		for _, f := range fs {
			p.held[i].bytes -= f.bytes
			p.held[i].blocks--
		}
	}
	p.ran++
	p.changedLocked()
}

// changedLocked wakes the waits of await; p.mu is held.
func (p *prefetcher) changedLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}
